"""Entry point of one GMI process: ``python -m gmiexp.launch.worker <plan.yaml>``.

torch.distributed.elastic starts it with LOCAL_RANK/WORLD_SIZE/MASTER_* set;
its GMI is this node's LOCAL_RANK-th (:func:`gmiexp.planner.nodes.gmi_for_local_rank`).
The GMI's environment is applied before CUDA initialises, so MPS/MIG variables
are in place: a cold worker applies it before importing torch, a warm one
(forked by :mod:`gmiexp.launch.warm`'s server, torch imported but no device
touched) first thing; an Isaac Gym task imports ``isaacgym`` before torch too
(it refuses to load after), so it always starts cold; then the GMI binds
its life to the launcher's (:mod:`gmiexp.launch.lifeline`), and one GMI per
private MPS daemon quits that daemon if the launcher is killed. A failure it
only saw in a collective (a peer died) exits with
:data:`gmiexp.launch.failure.COMM_EXIT_CODE`, so launchers name the root cause.
"""

from __future__ import annotations

import os
import resource
import sys
import traceback
from typing import TYPE_CHECKING, Any

from gmiexp import signals
from gmiexp.backends.mps_clients import kept_by
from gmiexp.backends.mps_daemon import quit_detached
from gmiexp.errors import REFUSAL_PREFIX, REFUSED_EXIT_CODE, ConfigError
from gmiexp.launch import lifeline, preemption
from gmiexp.launch.failure import COMM_EXIT_CODE, is_comm_error
from gmiexp.launch.gmi_env import apply_gmi_environment
from gmiexp.plan import Plan
from gmiexp.planner.nodes import gmi_for_local_rank
from gmiexp.shm.cleanup import cleanup_run
from gmiexp.status import StatusWriter

if TYPE_CHECKING:
    from gmiexp.config import TaskConfig


def current_rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def seed_process(seed: int) -> None:
    """Seed torch (every device), numpy and random from the GMI's seed (``gmiexp.planner.seeds``), before its role.

    rl-games' and rsl_rl's runners seed themselves from the same value; the serving and experience roles draw
    from these streams directly.
    """
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def run_gmi(plan: Any, gmi_id: int, status: Any = None) -> dict[str, Any]:
    """Run GMI ``gmi_id`` of ``plan`` in this process (also used in-process for 1-GMI plans)."""
    import torch

    from gmiexp.comm import reduction as reductions
    from gmiexp.comm.manager import GMIManager
    from gmiexp.role import GMIContext, load_role

    gmi = plan.gmi(gmi_id)
    status = status or StatusWriter(plan.run_dir, gmi_id)
    torch.set_num_threads(gmi.torch_threads)
    mgr = GMIManager(plan, gmi_id)
    status.beat(force=True, stage="rendezvous")
    mgr.init(timeout_s=float(plan.launch.collective_timeout_s))
    red = reductions.build(plan.reduction, mgr, plan.trainer_group)
    status.beat(force=True, reduction=red.name)  # what this GMI really built (make gpu-check compares the plan's)
    ctx = GMIContext(plan=plan, gmi=gmi, mgr=mgr, reduction=red, status=status)
    finished = False
    try:
        role_cls = load_role(plan.role)
        seed_process(gmi.seed)
        base_rss_mb = current_rss_mb()  # runtime (Python, torch, rl-games) loaded; the workload not yet built
        role = role_cls(ctx)
        status.beat(force=True, stage="running", graceful=bool(role_cls.stops_gracefully))
        metrics = role.run() or {}
        if signals.stop_requested():
            metrics["interrupted"] = True
        metrics.setdefault("time/comm_s", red.comm_s)
        metrics["mem/peak_rss_mb"] = peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        metrics["mem/workload_mb"] = max(0.0, peak - base_rss_mb)
        status.result(metrics)
        finished = True
        return metrics
    finally:
        red.close()
        mgr.close(finished=finished)


def import_simulator_first(task: TaskConfig) -> None:
    """Import a simulator that must precede torch: Isaac Gym's ``gymdeps`` raises once torch is loaded."""
    if task.simulator != "isaacgym":
        return
    if "torch" in sys.modules:
        raise RuntimeError("torch was imported before isaacgym in this GMI; Isaac Gym cannot load after it")
    import isaacgym  # noqa: F401


def bind_to_launcher(plan: Any, gmi_id: int) -> bool:
    """Die with the launcher, taking the run's shared-memory segments and private MPS daemons along.

    The launcher's session quits its private daemons; after ``kill -9`` of the launcher, the
    lowest-id client of each one does (:func:`gmiexp.backends.mps.kept_by`). Imports torch: call last.
    """
    tag = os.environ.get("GMIEXP_RUN_TAG")
    daemons = kept_by(plan, gmi_id)

    def orphaned() -> None:
        try:
            if tag:
                cleanup_run(tag)
        finally:
            quit_detached(daemons)

    return lifeline.bind(orphaned)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    preemption.ignore_in_worker()  # Slurm's requeue warning reaches every process; the launcher acts on it
    signals.ignore_interrupt_in_gmi()  # Ctrl-C: the launcher asks the GMIs to end the epoch (a stop file)
    plan = Plan.load(argv[0])
    # this node's local_rank-th GMI; not elastic's RANK, which follows the rendezvous's order of nodes
    rank = gmi_for_local_rank(plan, int(os.environ.get("LOCAL_RANK", "0")))
    status = StatusWriter(plan.run_dir, rank)  # pid and a first beat before the slow imports (the watchdog's view)
    apply_gmi_environment(plan.gmi(rank))
    import_simulator_first(plan.task)
    bind_to_launcher(plan, rank)
    try:
        run_gmi(plan, rank, status)
    except ConfigError as e:  # bad input only a GMI sees: the launcher makes it the run's exit 2, named as here
        print(f"{REFUSAL_PREFIX}{e}", file=sys.stderr, flush=True)
        return REFUSED_EXIT_CODE
    except Exception as e:
        traceback.print_exc()
        return COMM_EXIT_CODE if is_comm_error(e) else 1  # a peer's failure, seen in a collective: not the root
    return 0


if __name__ == "__main__":
    sys.exit(main())
