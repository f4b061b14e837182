"""Packing (seed 003): one seed sweep run by Hydra's basic launcher, then packed k at a time per GPU.

Every run is ``python -m gmiexp -m seed=... <sweep>``: the basic launcher runs the members one after
another, ``hydra/launcher=gmiexp_pack hydra.launcher.jobs_per_gpu=k`` runs k at a time per GPU (each
on its slice: a core set on CPU, an MPS share on a GPU). Repeats are interleaved (each repeat runs every
launcher once, in a rotated order) and each packed run is compared with the basic run of its own
repeat, so drift of a shared host over minutes cancels in the ratio. Makespan is the sweep command's
wall time; total env steps/s is every member's env steps over that makespan (start-up included),
read from each member's summary.json (``gmiexp.rundir``). Settings: config.yaml (CPU) and
paper.yaml (GPU) here.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import hydra
from omegaconf import DictConfig

from gmiexp.rundir import log_tail, read_summary, run_logged, write_csv

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def command(cfg, k: int, sweep_dir: Path) -> list[str]:
    launcher = [] if k == 1 else ["hydra/launcher=gmiexp_pack", f"hydra.launcher.jobs_per_gpu={k}", *cfg.launcher]
    return [sys.executable, "-m", "gmiexp", "-m", *launcher, *cfg.sweep,
            f"seed={','.join(str(s) for s in cfg.seeds)}", "experiment=packing", f"hydra.sweep.dir={sweep_dir}"]


def frames(run_dir: Path) -> int:
    hist = read_summary(run_dir)["history"]
    return hist[-1]["frames"] if hist else 0


def measure(cfg, k: int, sweep_dir: Path) -> dict:
    """Run the sweep with k members at a time (1: the basic launcher); makespan and total env steps/s."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    log = sweep_dir / "sweep.log"
    t0 = time.perf_counter()
    rc = run_logged(command(cfg, k, sweep_dir), log, cfg.timeout_s, cwd=ROOT)
    makespan = time.perf_counter() - t0
    if rc != 0:
        why = f"timeout after {cfg.timeout_s}s" if rc is None else f"exit {rc}"
        raise SystemExit(f"sweep failed ({why}): see {log}\n{log_tail(log)}")
    total = sum(frames(sweep_dir / str(i)) for i in range(len(cfg.seeds)))
    return {"k": k, "makespan_s": round(makespan, 2), "env_steps_per_s_total": round(total / makespan, 1)}


def summarise(runs: list[dict], packings: list[int]) -> list[dict]:
    """Per packing: medians, and the median of per-repeat makespan ratios against the basic launcher."""
    rows = []
    for k in packings:
        pairs = [(b, p) for b in runs if b["k"] == 1 for p in runs if p["k"] == k and p["repeat"] == b["repeat"]]
        rows.append({
            "k": k, "makespan_sequential_s": statistics.median(b["makespan_s"] for b, _ in pairs),
            "makespan_packed_s": statistics.median(p["makespan_s"] for _, p in pairs),
            "speedup": round(statistics.median(b["makespan_s"] / p["makespan_s"] for b, p in pairs), 3),
            "env_steps_per_s_sequential": statistics.median(b["env_steps_per_s_total"] for b, _ in pairs),
            "env_steps_per_s_packed": statistics.median(p["env_steps_per_s_total"] for _, p in pairs),
            "repeats": len(pairs)})
    return rows


@hydra.main(config_path=".", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    out = ROOT / cfg.results_dir
    out.mkdir(parents=True, exist_ok=True)
    modes = [1, *cfg.packings]
    runs = []
    for rep in range(cfg.repeats):
        for k in modes[rep % len(modes):] + modes[:rep % len(modes)]:  # rotated: interleaved repeats
            row = {"repeat": rep, **measure(cfg, k, out / "runs" / f"r{rep}_k{k}")}
            print(f"repeat {rep} {'basic launcher' if k == 1 else f'packed {k}/GPU':>15}: makespan "
                  f"{row['makespan_s']:7.1f} s, {row['env_steps_per_s_total']:9,.0f} env steps/s in total", flush=True)
            runs.append(row)
    write_csv(runs, out / "packing_runs.csv")
    rows = summarise(runs, list(cfg.packings))
    write_csv(rows, out / "packing.csv")
    print(f"{len(cfg.seeds)} members; medians over {cfg.repeats} interleaved repeats:")
    for r in rows:
        print(f"  packed {r['k']}/GPU: makespan {r['makespan_packed_s']:.1f} s vs {r['makespan_sequential_s']:.1f} s "
              f"one after another (ratio {r['speedup']:.2f}x); total env steps/s {r['env_steps_per_s_packed']:,.0f} "
              f"vs {r['env_steps_per_s_sequential']:,.0f}")
    print(f"wrote {out / 'packing.csv'} and {out / 'packing_runs.csv'}")


if __name__ == "__main__":
    main()
