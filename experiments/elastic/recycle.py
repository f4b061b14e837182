"""Recycling a packed sweep's freed slices: the makespan of uneven members with and without ``recycle``.

    python experiments/elastic/recycle.py                    # Ant, 2 short + 2 long (4x) members, 3 pairs

Four members (``seed=1,2`` x ``max_iterations=short,long``) run packed ``jobs_per_gpu`` at a time
(``hydra/launcher=gmiexp_pack``). Without recycling, a short member's slice idles once it ends; with
``hydra.launcher.recycle=true`` a long member grows into it (one more GMI per GPU on both slices' cores, a
re-shape at its next epoch boundary). Each pair runs both sweeps back to back, the order alternating, so a
drifting host slows both alike. Reported per pair: each sweep's makespan (pack.json) and their ratio
(recycle / no recycle), the re-shapes the long members made; then the medians. Run it on a quiet machine.

Writes results/recycle_bench.csv and results/recycle_bench.md.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from statistics import median

import hydra
from omegaconf import DictConfig

from gmiexp.rundir import log_tail, results_dir, run_logged, write_csv, write_report

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def command(args: DictConfig, recycle: bool, sweep_dir: Path) -> list[str]:
    long = args.short_iterations * args.long_factor
    return [sys.executable, "-m", "gmiexp", "-m", "hydra/launcher=gmiexp_pack",
            f"hydra.launcher.jobs_per_gpu={args.jobs_per_gpu}", f"hydra.launcher.recycle={str(recycle).lower()}",
            f"task={args.task}", f"num_envs={args.num_envs}", "gmis_per_gpu=1", "launch.progress=false",
            *args.overrides, "seed=1,2", f"max_iterations={args.short_iterations},{long}",
            f"hydra.sweep.dir={sweep_dir}"]


def sweep(args: DictConfig, recycle: bool) -> dict:
    sweep_dir = Path(tempfile.mkdtemp(prefix=f"recycle_{'on' if recycle else 'off'}_"))
    log = sweep_dir / "sweep.log"
    rc = run_logged(command(args, recycle, sweep_dir), log, args.timeout_s, cwd=ROOT)
    if rc != 0:
        raise SystemExit(f"sweep failed (exit {rc}): see {log}\n{log_tail(log)}")
    table = json.loads((sweep_dir / "pack.json").read_text())
    return {"makespan_s": table["makespan_s"], "reshapes": sum(int(m.get("reshapes") or 0) for m in table["members"]),
            "slots": "; ".join(f"#{m['job']} {m['slot']}" for m in table["members"]), "dir": str(sweep_dir)}


@hydra.main(config_path=".", config_name="recycle", version_base=None)
def main(args: DictConfig) -> None:
    rows = []
    for pair in range(args.pairs):
        got = {}
        for recycle in ((False, True) if pair % 2 == 0 else (True, False)):
            got[recycle] = sweep(args, recycle)
            print(f"pair {pair} recycle={recycle}: makespan {got[recycle]['makespan_s']:.1f} s, "
                  f"{got[recycle]['reshapes']} re-shapes ({got[recycle]['dir']})", flush=True)
        rows.append({"pair": pair, "makespan_off_s": got[False]["makespan_s"], "makespan_on_s": got[True]["makespan_s"],
                     "ratio": got[True]["makespan_s"] / got[False]["makespan_s"], "reshapes_on": got[True]["reshapes"],
                     "slots_on": got[True]["slots"]})
    report(rows, args)


def report(rows: list[dict], args: DictConfig) -> str:
    res = results_dir(args.results_dir, __file__)
    write_csv(rows, res / "recycle_bench.csv")
    lines = [f"task={args.task} num_envs={args.num_envs} short={args.short_iterations} epochs, long="
             f"{args.short_iterations * args.long_factor} epochs, jobs_per_gpu={args.jobs_per_gpu}, pairs={args.pairs}",
             "", "| pair | makespan, no recycle (s) | makespan, recycle (s) | ratio | re-shapes | slots (recycle) |",
             "|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {r['pair']} | {r['makespan_off_s']:.1f} | {r['makespan_on_s']:.1f} | {r['ratio']:.3f} | "
              f"{r['reshapes_on']} | {r['slots_on']} |" for r in rows]
    ratios = [r["ratio"] for r in rows]
    lines += ["", f"median makespan ratio (recycle / no recycle): {median(ratios):.3f} "
              f"(pairs {min(ratios):.3f}..{max(ratios):.3f})"]
    return write_report(lines, res / "recycle_bench.md")


if __name__ == "__main__":
    main()
