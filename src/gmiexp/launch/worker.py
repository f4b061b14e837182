"""Entry point of one GMI process: ``python -m gmiexp.launch.worker <plan.yaml>``.

torch.distributed.elastic starts it with RANK/WORLD_SIZE/MASTER_* set; the
rank is the GMI id. The GMI's environment is applied before torch is
imported, so MPS/MIG variables are in place before CUDA initialises; an
Isaac Gym task imports ``isaacgym`` before torch too (it refuses to load
after); then the GMI binds its life to the launcher's (:mod:`gmiexp.launch.lifeline`).
"""

from __future__ import annotations

import os
import resource
import sys
import traceback
from typing import Any


def current_rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def run_gmi(plan: Any, gmi_id: int) -> dict[str, Any]:
    """Run GMI ``gmi_id`` of ``plan`` in this process (also used in-process for 1-GMI plans)."""
    import torch

    from gmiexp.comm import reduction as reductions
    from gmiexp.comm.manager import GMIManager
    from gmiexp.launch.status import StatusWriter
    from gmiexp.role import GMIContext, load_role

    gmi = plan.gmi(gmi_id)
    status = StatusWriter(plan.run_dir, gmi_id)
    torch.set_num_threads(gmi.torch_threads)
    mgr = GMIManager(plan, gmi_id)
    status.beat(force=True, stage="rendezvous")
    mgr.init(timeout_s=float(plan.launch.get("collective_timeout_s", 300.0)))
    red = reductions.build(plan.reduction, mgr, plan.trainer_group)
    ctx = GMIContext(plan=plan, gmi=gmi, mgr=mgr, reduction=red, status=status)
    finished = False
    try:
        role_cls = load_role(plan.role)
        base_rss_mb = current_rss_mb()  # runtime (Python, torch, rl-games) loaded; the workload not yet built
        role = role_cls(ctx)
        status.beat(force=True, stage="running")
        metrics = role.run() or {}
        metrics.setdefault("time/comm_s", red.comm_s)
        metrics["mem/peak_rss_mb"] = peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        metrics["mem/workload_mb"] = max(0.0, peak - base_rss_mb)
        status.result(metrics)
        finished = True
        return metrics
    finally:
        red.close()
        mgr.close(finished=finished)


def import_simulator_first(task: dict[str, Any]) -> None:
    """Import a simulator that must precede torch: Isaac Gym's ``gymdeps`` raises once torch is loaded."""
    if task.get("simulator") != "isaacgym":
        return
    if "torch" in sys.modules:
        raise RuntimeError("torch was imported before isaacgym in this GMI; Isaac Gym cannot load after it")
    import isaacgym  # noqa: F401


def bind_to_launcher() -> None:
    """Die with the launcher, removing the run's shared-memory segments (imports torch: call it last)."""
    from gmiexp.comm.channels.segment import cleanup_run
    from gmiexp.launch import lifeline

    tag = os.environ.get("GMIEXP_RUN_TAG")
    lifeline.bind(lambda: cleanup_run(tag) if tag else None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from gmiexp.launch.gmi_env import apply_gmi_environment
    from gmiexp.plan import Plan

    plan = Plan.load(argv[0])
    rank = int(os.environ.get("RANK", "0"))
    apply_gmi_environment(plan.gmi(rank))
    import_simulator_first(plan.task)
    bind_to_launcher()
    try:
        run_gmi(plan, rank)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
