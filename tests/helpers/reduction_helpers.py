"""Shared helpers of the reduction tests: plans from layouts, thread and process drivers, checks."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

from gmiexp.config import LaunchConfig
from gmiexp.plan import GMI, Plan


def plan_of(counts: list[int], trainers: list[int] | None = None, nnodes: int = 1) -> Plan:
    """GPU-major plan with ``counts[d]`` GMIs on logical GPU d of every one of ``nnodes`` nodes (node-major ids)."""
    gmis, k = [], 0
    for node in range(nnodes):
        for d, c in enumerate(counts):
            for i in range(c):
                gmis.append(GMI(id=k, device=d, local_index=i, roles=["trainer"], node=node))
                k += 1
    group = list(range(k)) if trainers is None else trainers
    launch = LaunchConfig(nnodes=nnodes, rdzv_endpoint="127.0.0.1:29400" if nnodes > 1 else None)
    return Plan(gmis=gmis, layout="tcg_ex", backend="direct", reduction="", trainer_group=group, launch=launch)


def inputs_for(world: int, numel: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(numel, generator=g) * (1 + r) for r in range(world)]


def check(results: dict[int, torch.Tensor], inputs: list[torch.Tensor], members: list[int], average: bool) -> None:
    """Bitwise identical on every member, and within float32 error of the float64 sum (or mean)."""
    first = results[members[0]]
    for m in members:
        assert torch.equal(results[m], first), f"member {m} differs from member {members[0]}"
    xs = torch.stack([inputs[m].double() for m in members])
    ref = xs.sum(0)
    bound = len(members) * 2.0**-23 * xs.abs().sum(0) + 1e-30
    if average:
        ref, bound = ref / len(members), bound / len(members)
    err = (first.double() - ref).abs()
    assert bool((err <= bound).all()), f"max error {float(err.max())} above float32 bound"


def shm_leftovers(tag: str) -> list[str]:
    return [f for f in os.listdir("/dev/shm") if tag in f]


def new_tag() -> str:
    return "t" + uuid.uuid4().hex[:10]


@contextlib.contextmanager
def run_tag() -> Iterator[str]:
    """A fresh GMIEXP_RUN_TAG (unique segment names) for the duration, restored afterwards."""
    tag, old = new_tag(), os.environ.get("GMIEXP_RUN_TAG")
    os.environ["GMIEXP_RUN_TAG"] = tag
    try:
        yield tag
    finally:
        if old is None:
            os.environ.pop("GMIEXP_RUN_TAG", None)
        else:
            os.environ["GMIEXP_RUN_TAG"] = old


def make(strategy: str, mgr, members, coll, timeout_s: float = 20.0):
    from gmiexp.comm.reduction.har import HAR
    from gmiexp.comm.reduction.mpr import MPR
    from gmiexp.comm.reduction.mrr import MRR

    if strategy == "mpr":
        return MPR(mgr, members, collective=coll, timeout_s=timeout_s)
    if strategy == "har":
        return HAR(mgr, members, collective=coll, timeout_s=timeout_s)
    if strategy == "mrr":
        return MRR(mgr, members, collective=coll)
    raise ValueError(strategy)


def node_tags(tag: str, nnodes: int) -> list[str]:
    """The run tag each node's launcher sets (GMIEXP_RUN_TAG): a different one per node, as on real nodes."""
    return [tag if nnodes == 1 else f"{tag}n{n}" for n in range(nnodes)]


def node_manager(plan: Plan, rank: int, tags: list[str] | None):
    """GMI ``rank``'s manager; with ``tags`` it names segments with its node's tag (GMIs of a node share one)."""
    from gmiexp.comm.manager import GMIManager

    if tags is None:
        return GMIManager(plan, rank)

    class NodeManager(GMIManager):
        @property
        def run_tag(self) -> str:
            return tags[self.gmi.node]

    return NodeManager(plan, rank)


def run_threads(plan: Plan, strategy: str, inputs: list[torch.Tensor], average: bool = True,
                calls: int = 1, tags: list[str] | None = None) -> dict[int, torch.Tensor]:
    """Every GMI of ``plan`` as a thread of this process, with shared memory and a LocalCollective.

    ``tags``: one run tag per node, so GMIs of different nodes can never open each other's segments.
    """
    from gmiexp.comm.reduction.collective import LocalWorld

    world = LocalWorld(plan.world_size, timeout_s=30)
    results: dict[int, torch.Tensor] = {}
    errors: list[str] = []

    def member(rank: int) -> None:
        try:
            mgr = node_manager(plan, rank, tags)
            red = make(strategy, mgr, plan.trainer_group, world.collective(rank))
            try:
                for _ in range(calls):
                    x = inputs[rank].clone()
                    red.allreduce_(x, average=average)
                results[rank] = x
            finally:
                red.close()
        except BaseException:
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=member, args=(r,), daemon=True) for r in range(plan.world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a member thread hung"
    assert not errors, errors[0]
    return results


# ---- real processes (spawned) ------------------------------------------------
def proc_main(rank: int, counts: list[int], port: int, tag: str, out: str, strategies: list[str],
              numel: int, kill_rank: int = -1, timeout_s: float = 20.0, nnodes: int = 1) -> None:
    """One GMI: gloo default group, build() each strategy, reduce twice, save results.

    With ``nnodes`` > 1 the GMI takes its node's run tag, as a GMI started by that node's launcher would.
    """
    plan = plan_of(counts, nnodes=nnodes)
    os.environ["GMIEXP_RUN_TAG"] = node_tags(tag, nnodes)[plan.gmi(rank).node]
    os.environ["GMIEXP_REDUCTION_TIMEOUT_S"] = str(timeout_s)
    import signal

    import torch.distributed as dist

    from gmiexp.comm.manager import GMIManager
    from gmiexp.comm.reduction import build, shm

    shm.DEFAULT_TIMEOUT_S = timeout_s
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=plan.world_size)
    mgr = GMIManager(plan, rank)
    inputs = inputs_for(plan.world_size, numel, seed=7)
    for s in strategies:
        red = build(s, mgr, plan.trainer_group)
        x = inputs[rank].clone()
        red.allreduce_(x, average=False)
        if rank == kill_rank:
            os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.monotonic()
        try:
            y = inputs[rank].clone()
            red.allreduce_(y, average=True)
        except Exception as e:  # the kill test expects this on the survivors
            Path(out, f"{s}_{rank}.err").write_text(f"{type(e).__name__} {time.monotonic() - t0:.3f} {e}")
            os._exit(0)
        np.save(Path(out, f"{s}_{rank}_sum.npy"), x.numpy())
        np.save(Path(out, f"{s}_{rank}_mean.npy"), y.numpy())
        red.close()
    dist.destroy_process_group()


def spawn_members(counts: list[int], strategies: list[str], numel: int, tmp_path: Path, *, kill_rank: int = -1,
                  timeout_s: float = 20.0, nnodes: int = 1, join_s: float = 120.0) -> tuple[list, str]:
    """Every GMI of ``counts`` (x ``nnodes``) as its own spawned process running :func:`proc_main`; (procs, tag)."""
    import multiprocessing as mp

    from gmiexp.launch.launcher import free_port

    tag = new_tag()
    ctx = mp.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=proc_main, args=(r, counts, port, tag, str(tmp_path), strategies, numel, kill_rank,
                                                  timeout_s, nnodes), daemon=True) for r in range(sum(counts) * nnodes)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(join_s)
        assert not any(p.is_alive() for p in procs), "a GMI process hung"
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    return procs, tag


class ThreadSum:
    """An in-place sum over ``world`` threads standing for GMIs (in rank order: every one gets the same bits).

    ``for_rank(r)`` is GMI ``r``'s all-reduce, as the trainers' reductions hand one to their callers.
    """

    def __init__(self, world: int) -> None:
        self.world, self.parts = world, {}
        self.barrier = threading.Barrier(world)

    def for_rank(self, rank: int):  # noqa: ANN201
        def all_reduce(t: torch.Tensor) -> None:
            self.parts[rank] = t.clone()
            self.barrier.wait()
            total = sum(self.parts[r] for r in range(self.world))
            self.barrier.wait()
            t.copy_(total)

        return all_reduce


def run_gmis(world: int, fn: Callable[[int, Callable[[torch.Tensor], None]], object]) -> list[object]:
    """``fn(rank, all_reduce)`` on ``world`` threads standing for GMIs (a :class:`ThreadSum`); each one's result."""
    red, out = ThreadSum(world), [None] * world

    def body(i: int) -> None:
        out[i] = fn(i, red.for_rank(i))

    threads = [threading.Thread(target=body, args=(i,)) for i in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
        assert not t.is_alive(), "a GMI waits on a collective the others never joined"
    return out
