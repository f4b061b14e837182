"""`mode=plan` for every documented preset and a layout x backend x reduction matrix, recorded once.

``python tests/helpers/plan_golden.py record`` writes ``tests/planner/plans_recorded.json``; the test
``tests/planner/test_plans_unchanged.py`` renders the same cases and compares. A case's record is its exit
code and its stdout (the Plan YAML, or nothing) with the run directory replaced by ``<run_dir>``. Cases on the
host's own hardware depend on its core count and are only compared on a host with the recorded count.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

RECORD = Path(__file__).resolve().parents[1] / "planner" / "plans_recorded.json"
RUN_DIR = Path("/tmp/gmiexp-plan-golden/run")

DGX = ["hardware=dgx_a100", "hardware.mig=false"]
DOCUMENTED = [
    ["mode=plan"],
    ["mode=plan", "backend=mps", "num_gpus=8", "gmis_per_gpu=2"],
    ["mode=plan", "batch.total_envs=128", "gmis_per_gpu=2"],
    ["mode=plan", *DGX, "num_gpus=4", "gmis_per_gpu=3", "backend=mps"],
    ["mode=plan", *DGX, "num_gpus=8", "gmis_per_gpu=2", "backend=mps", "launch.nnodes=4",
     "launch.rdzv_endpoint=node001:29400"],
    ["mode=plan", "hardware=dgx_a100", "layout=tcg", "backend=auto"],
    ["mode=plan", "hardware=dgx_a100", "num_gpus=4", "gmis_per_gpu=3", "backend=mps"],
    ["mode=plan", "hardware=h100x8", "backend=auto"],
    ["mode=plan", "hardware=h100x8", "backend=auto", "hardware.mig=true"],
    ["mode=plan", "hardware=h100x8", "hardware.mig=true", "backend=mig", "reduction=har"],
    ["mode=plan", "hardware=h200x1", "gmis_per_gpu=2", "backend=mig"],
    ["mode=plan", "hardware=h200x1", "hardware.mig=true", "gmis_per_gpu=3", "backend=mig"],
    ["mode=plan", "+preset=cartpole_cpu"],
]
LAYOUTS = ["tcg", "tdg", "tcg_ex", "tdg_ex", "decoupled_async"]
#: the matrix plans Ant-sized policies and batches (its reductions' costs depend on them), whatever the default
#: job is (a CartPole that learns in seconds: tests/test_first_run.py)
ANT = ["task=Ant", "num_envs=64"]
MATRIX = [
    ["mode=plan", *ANT, f"layout={lay}", f"backend={be}", "num_gpus=2", "gmis_per_gpu=2",
     *(["hardware=h100x8", "hardware.mig=true"] if be == "mig" else DGX)]
    for lay in LAYOUTS for be in ("direct", "mps", "mig", "auto")
] + [
    ["mode=plan", *ANT, "layout=tcg_ex", f"reduction={r}", "backend=mps", "num_gpus=4", "gmis_per_gpu=2", *DGX]
    for r in ("allreduce", "mpr", "mrr", "har", "auto")
] + [
    ["mode=plan", "task=Ant", "layout=tdg_ex", "batch.total_envs=256", "num_gpus=2", "gmis_per_gpu=2", "backend=mps",
     *DGX],
    ["mode=plan", "task=Ant", "layout=decoupled_async", "batch.total_envs=256", "gmis_per_gpu=2"],
    ["mode=plan", "task=Humanoid", "num_envs=64", "layout=tcg_ex", "backend=mps", *DGX],
    ["mode=plan", "task=Pong", "num_envs=64", "gmis_per_gpu=2"],
    ["mode=plan", "task=Cartpole", "num_envs=64", "layout=tdg_ex", "gmis_per_gpu=2"],
    ["mode=plan", "train=rlgames", "train.file=rl_games:configs/mujoco/ant_envpool.yaml", "gmis_per_gpu=2"],
    ["mode=plan", *ANT, "layout=tcg_ex", "backend=mps", "num_gpus=8", "gmis_per_gpu=2", *DGX, "launch.nnodes=2",
     "launch.rdzv_endpoint=node001:29400", "reduction=har"],
]
CASES = DOCUMENTED + MATRIX


def host_dependent(case: list[str]) -> bool:
    """A case planned on this host's own hardware (no preset): its cores shape the Plan."""
    return not any(a.startswith("hardware=") for a in case)


def render(case: list[str]) -> dict:
    """The exit code and stdout of ``python -m gmiexp <case>``, run in this process."""
    from gmiexp.app import run_job
    from gmiexp.config.compose import compose_config
    from gmiexp.errors import GmiexpError

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = run_job(compose_config(*case), RUN_DIR)[0]
        except GmiexpError as e:
            print(f"gmiexp: error: {e}", file=sys.stderr)
            rc = e.exit_code
    text = out.getvalue().replace(str(RUN_DIR), "<run_dir>")
    error = [ln for ln in err.getvalue().splitlines() if ln.startswith("gmiexp: error:")]
    return {"rc": rc, "stdout": text, "error": error}


def record() -> None:
    """Write every case's rendering (and this host's core count) to :data:`RECORD`."""
    cases = [{"args": c, **render(c)} for c in CASES]
    RECORD.write_text(json.dumps({"cpus": len(os.sched_getaffinity(0)), "cases": cases}, indent=1) + "\n")
    print(f"{len(cases)} cases -> {RECORD}")


if __name__ == "__main__" and sys.argv[1:] == ["record"]:
    record()
