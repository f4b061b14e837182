"""MPR, multi-process reduction: all members reduce through host shared memory (paper section 4.1).

The generic strategy inside a node: it serves any layout whose members share one host (one node).
On a GPU the gradient is copied to pinned host memory (the shared segment
is registered with CUDA), reduced on the CPU, and copied back.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence

import torch

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.reduction.collective import Collective, TorchCollective
from gmiexp.comm.reduction.shm import ShmArena
from gmiexp.comm.reduction.strategy import REDUCTIONS, Reduction
from gmiexp.errors import ConfigError
from gmiexp.shm.names import segment_name

_instances: dict[tuple[str, int], itertools.count] = {}


def arena_name(mgr: GMIManager, kind: str) -> str:
    """``gmiexp_<run_tag>_<kind><k>``: the k-th strategy of this kind built in the run (same on all GMIs)."""
    counter = _instances.setdefault((mgr.run_tag, mgr.rank), itertools.count())
    return segment_name(f"{kind}{next(counter)}", mgr.run_tag, unique=False)


def open_arena(
    name: str, members: Sequence[int], rank: int, coll: Collective, timeout_s: float | None = None
) -> ShmArena | None:
    """Collective over every GMI: the lowest member creates, all GMIs barrier, the others attach, join.

    Returns None for GMIs outside ``members`` and for single-member arenas.
    """
    members = sorted(members)
    index = members.index(rank) if rank in members else None
    solo = len(members) < 2
    arena = None
    if index == 0 and not solo:
        arena = ShmArena.create(name, len(members), timeout_s)
    try:
        coll.barrier()
        if index is not None and index > 0:
            arena = ShmArena.attach(name, len(members), index, timeout_s)
        if arena is not None:
            arena.join()
    except BaseException:
        if arena is not None:
            arena.close()
        raise
    return arena


@REDUCTIONS.register("mpr")
class MPR(Reduction):
    """Shared-memory reduce-scatter + all-gather among all members (they must share a host)."""

    name = "mpr"

    def __init__(
        self,
        mgr: GMIManager,
        members: list[int],
        *,
        collective: Collective | None = None,
        timeout_s: float | None = None,
    ) -> None:
        super().__init__(mgr, members)
        nodes = {mgr.plan.gmi(m).node for m in self.members}
        if len(nodes) > 1:  # resolve() refuses it before launch; a direct construction must not attach across
            raise ConfigError(f"invalid reduction: 'mpr' over GMIs of nodes {sorted(nodes)}: MPR stays inside a node")
        coll = collective or TorchCollective(mgr)
        self.arena = open_arena(arena_name(mgr, "mpr"), self.members, mgr.rank, coll, timeout_s)

    def allreduce_(self, flat: torch.Tensor, average: bool = True) -> torch.Tensor:
        """As :meth:`Reduction.allreduce_`, with the averaging fused into the shared-memory copy out."""
        t0 = time.perf_counter()
        if self.arena is not None:
            self.arena.allreduce(flat, divisor=len(self.members) if average else None)
        self.comm_s += time.perf_counter() - t0
        self.calls += 1
        return flat

    def buffer(self, numel: int) -> torch.Tensor:
        """A CPU float32 tensor to flatten gradients into; reducing it skips one copy (collective).

        Every member calls it with the same ``numel``; non-members and
        single-member groups get a private tensor.
        """
        if self.arena is None:
            return torch.empty(numel)
        return self.arena.buffer(numel)

    def _reduce(self, flat: torch.Tensor) -> None:
        if self.arena is not None:
            self.arena.allreduce(flat)

    def close(self) -> None:
        if self.arena is not None:
            self.arena.close()
            self.arena = None
