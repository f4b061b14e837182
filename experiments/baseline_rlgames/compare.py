"""gmiexp (1 GMI, 2 GMIs) against vanilla rl-games, same task and total envs, measured in one session.

    python experiments/baseline_rlgames/compare.py --task Ant --total-envs 128 --iterations 40

Writes results/compare.csv and results/compare.md and prints the ratios and,
for the GMI runs, where the time goes (time/sim_s, inference, train, comm).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent


def run(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{out.stderr[-3000:]}")
    line = out.stdout.strip().splitlines()[-1]
    print(line, flush=True)
    run_dir = line.rsplit("| ", 1)[-1].strip()
    return json.loads((Path(run_dir) / "summary.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="Ant")
    ap.add_argument("--total-envs", type=int, default=128)
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    common = [f"task={args.task}", f"max_iterations={args.iterations}"]
    py = sys.executable
    rows = []
    for rep in range(args.repeats):
        base = run([py, str(HERE / "run_baseline.py"), *common, f"num_envs={args.total_envs}"])
        rows.append({"run": "rl_games (1 process)", "rep": rep, **flat(base)})
        for gmis in (1, 2):
            d = tempfile.mkdtemp(prefix=f"gmiexp_{gmis}gmi_")
            s = run([py, "-m", "gmiexp", *common, "num_gpus=1", f"gmis_per_gpu={gmis}",
                     f"num_envs={args.total_envs // gmis}", "launch.progress=false", f"hydra.run.dir={d}"])
            rows.append({"run": f"gmiexp {gmis} GMI", "rep": rep, **flat(s)})
    report(rows, args)


def flat(s: dict) -> dict:
    m = s["metrics"]
    keys = ("perf/env_steps_per_s", "time/sim_s", "time/inference_s", "time/train_s", "time/comm_s", "reward/mean")
    return {k: m.get(k) for k in keys} | {"wall_s": s["wall_s"]}


def report(rows: list[dict], args: argparse.Namespace) -> None:
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    with open(res / "compare.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r["run"], []).append(r["perf/env_steps_per_s"])
    base = sum(by["rl_games (1 process)"]) / len(by["rl_games (1 process)"])
    lines = [f"task={args.task} total_envs={args.total_envs} iterations={args.iterations}", "",
             "| run | env steps/s | vs rl_games | sim s | inference s | train s | comm s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        lines.append(f"| {r['run']} | {r['perf/env_steps_per_s']:,.0f} | {r['perf/env_steps_per_s'] / base:.2f}x | "
                     f"{fmt(r['time/sim_s'])} | {fmt(r['time/inference_s'])} | {fmt(r['time/train_s'])} | "
                     f"{fmt(r['time/comm_s'])} |")
    lines += ["", "| run | median env steps/s | vs rl_games median |", "|---|---:|---:|"]
    base_med = median(by["rl_games (1 process)"])
    for name, vals in by.items():
        lines.append(f"| {name} | {median(vals):,.0f} | {median(vals) / base_med:.2f}x |")
    text = "\n".join(lines)
    (res / "compare.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
