"""Run k independent training jobs concurrently on one device and then one after another; record both.

Each job is a separate ``python -m gmiexp`` run (its own seed and run directory). The makespan of the
packed jobs against the sum of the sequential ones is the seed-003 comparison.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def cores() -> int:
    return len(os.sched_getaffinity(0))


def job_cmd(cfg, k: int, seed: int, run_dir: Path, packed: bool) -> list[str]:
    extra = []
    if packed:
        fill = {"k": k, "share": 100 // k, "cores": max(1, cores() // k)}
        extra = [o.format(**fill) for o in cfg.concurrent_overrides]
        if cfg.cpu_share:
            extra.append(f"hardware.cpu_cores={fill['cores']}")
    return [sys.executable, "-m", "gmiexp", *cfg.job_overrides, *extra, f"seed={seed}",
            "experiment=packing", f"hydra.run.dir={run_dir}"]


def launch(cmds: list[list[str]], timeout_s: float) -> float:
    """Start every command at once, wait for all; return the makespan."""
    t0 = time.perf_counter()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [subprocess.Popen(c, cwd=ROOT, **quiet) for c in cmds]
    for p in procs:
        if p.wait(timeout=timeout_s) != 0:
            raise SystemExit(f"job failed: {' '.join(p.args)}")
    return time.perf_counter() - t0


def frames(run_dir: Path) -> int:
    hist = json.loads((run_dir / "summary.json").read_text())["history"]
    return hist[-1]["frames"] if hist else 0


def measure(cfg, k: int, out: Path) -> dict:
    base = out / "runs" / f"k{k}"
    packed = [job_cmd(cfg, k, s, base / f"packed_{s}", True) for s in range(k)]
    seq = [job_cmd(cfg, k, s, base / f"seq_{s}", False) for s in range(k)]
    t_packed = launch(packed, cfg.timeout_s)
    t_seq = sum(launch([c], cfg.timeout_s) for c in seq)
    f_packed = sum(frames(base / f"packed_{s}") for s in range(k))
    f_seq = sum(frames(base / f"seq_{s}") for s in range(k))
    row = {"k": k, "makespan_packed_s": round(t_packed, 2), "makespan_sequential_s": round(t_seq, 2),
           "speedup": round(t_seq / t_packed, 3), "env_steps_per_s_packed": round(f_packed / t_packed, 1),
           "env_steps_per_s_sequential": round(f_seq / t_seq, 1)}
    print(row, flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config-name", default="config")
    ap.add_argument("overrides", nargs="*", help="OmegaConf dotlist, e.g. jobs=[2]")
    a = ap.parse_args()
    cfg = OmegaConf.merge(OmegaConf.load(HERE / f"{a.config_name}.yaml"), OmegaConf.from_dotlist(a.overrides))
    out = ROOT / cfg.results_dir
    out.mkdir(parents=True, exist_ok=True)
    rows = [measure(cfg, k, out) for k in cfg.jobs]
    with (out / "packing.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out / 'packing.csv'}")


if __name__ == "__main__":
    main()
