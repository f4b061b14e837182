"""Ask a running job to re-shape its GMIs at its next epoch boundary.

``python -m gmiexp.tools.reshape RUN_DIR gmis_per_gpu=N``, or ``trainers_per_gpu=N`` (tdg_ex, decoupled_async:
the agent:trainer split, at the run's GMIs per GPU).

The run must have started with ``launch.reshape=request`` (or ``auto``). The request is refused at once (exit 2)
when the run cannot take it: no run there, not running, re-shaping off, or a partition that cannot share the
run's global batch. Otherwise the launcher takes it at its next poll, the GMIs end their epoch, and this waits
for the outcome and says it: ``done`` (exit 0, with the cost) or ``refused`` (exit 1, why). A scheduler can
use ``--no-wait`` and read ``reshapes.jsonl`` in the run dir.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gmiexp.launch.elastic import read_log, request
from gmiexp.launch.ownership import running
from gmiexp.plan import Plan


def refuse(why: str) -> int:
    print(f"gmiexp.tools.reshape: refused: {why}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gmiexp.tools.reshape", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("setting", help="gmis_per_gpu=N (the GMIs per GPU to move to) or trainers_per_gpu=N (an "
                   "experience layout's trainer GMIs per GPU)")
    p.add_argument("--no-wait", action="store_true", help="write the request and return")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the outcome (default 600)")
    a = p.parse_args(argv)

    key, _, value = a.setting.partition("=")
    if key not in ("gmis_per_gpu", "trainers_per_gpu") or not value.isdigit() or int(value) < 1:
        return refuse(f"invalid setting {a.setting!r}; valid: gmis_per_gpu=N or trainers_per_gpu=N with N >= 1")
    plan_path = a.run_dir / "plan.yaml"
    if not plan_path.is_file():
        return refuse(f"invalid run dir {a.run_dir}: no plan.yaml (not a gmiexp run dir; a multi-node run's "
                      "node directories are node<R>/, and re-shaping is single-node)")
    if not running(a.run_dir):
        return refuse(f"no run is running in {a.run_dir}")
    plan = Plan.load(plan_path)
    if plan.launch.reshape == "off":
        return refuse(f"the run in {a.run_dir} started with launch.reshape=off; valid: start it with "
                      "launch.reshape=request (or auto)")
    gb = plan.global_batch
    if gb is None:  # a re-shaping run always has one (its starting batch, planner/partition.py)
        return refuse(f"the plan in {a.run_dir} has no global batch to keep; valid: a run started with "
                      "launch.reshape=request (or auto)")
    batch = f"{gb.total_envs} environments, minibatch {gb.total_minibatch}"
    if key == "trainers_per_gpu":
        splits = gb.trainer_splits
        if splits is None:
            return refuse(f"layout={plan.layout} has no trainer GMIs of its own to re-split (every GMI trains); "
                          "valid: trainers_per_gpu=N for layout=tdg_ex or decoupled_async")
        if int(value) == gb.trainers_per_gpu:
            return refuse(f"the run already has trainers_per_gpu={value}")
        if int(value) not in splits:
            return refuse(f"trainers_per_gpu={value} cannot share the run's global batch ({batch}) at gmis_per_gpu="
                          f"{gb.gmis_per_gpu}; valid: {splits}")
        rid = request(a.run_dir, gb.gmis_per_gpu, {"layout.trainers_per_gpu": int(value)})
    else:
        reachable = list(gb.reachable)
        if int(value) not in reachable:
            return refuse(f"gmis_per_gpu={value} cannot share the run's global batch ({batch}); valid: {reachable}")
        rid = request(a.run_dir, int(value))
    print(f"gmiexp.tools.reshape: request {rid}: {key}={value} at the next epoch boundary", file=sys.stderr)
    if a.no_wait:
        return 0
    deadline = time.monotonic() + a.timeout
    while time.monotonic() < deadline:
        for rec in read_log(a.run_dir):
            if rec.get("request") == rid:
                if rec.get("status") == "done":
                    also = "".join(f", {k}={v}" for k, v in (rec.get("overrides") or {}).items())
                    print(f"done: at epoch {rec['epoch']}, gmis_per_gpu {rec['from']} -> {rec['to']}{also} "
                          f"(stop {rec['stop_s']:.1f} s, re-plan {rec['plan_s']:.1f} s)")
                    return 0
                print(f"refused: {rec.get('why')}")
                return 1
        if not running(a.run_dir):
            print("refused: the run ended before it took the request")
            return 1
        time.sleep(0.5)
    print(f"gmiexp.tools.reshape: no outcome within {a.timeout:g} s; the request stands ({a.run_dir}/"
          "reshape_request.json)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
