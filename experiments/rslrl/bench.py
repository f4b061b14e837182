"""Time to reward: mjlab's own training (one process) against ``train=rslrl`` with 2 GMIs at the same global batch.

    python experiments/rslrl/bench.py                                  # Cartpole, 256 envs, 3 pairs of 60 s
    python experiments/rslrl/bench.py pairs=1 seconds=20 num_envs=16   # a quick look

Interleaved pairs (own-gmiexp, gmiexp-own, ...), each run given the same wall time and then stopped as Ctrl-C
stops it. Per pair: the return and frames each side reached by then (the own run's rsl_rl
``Train/mean_reward``, the gmiexp run's run-wide ``reward/mean``), the seconds each took to reach the own run's
final return (from the command's start, start-up included) and their ratio (own / gmiexp: above 1, gmiexp got
there sooner); then the median ratio. Run it on a quiet machine: the ratios are timings. Writes
results/rslrl_bench.csv and .md. Settings: bench.yaml here.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig
from own_train import tb_rewards  # the own run's TensorBoard reader (a sibling script)

from gmiexp.rundir import RunFailed, results_dir, run_for, write_csv, write_report
from gmiexp.stats import time_to_return, value_at

HERE = Path(__file__).resolve().parent


def own(args: DictConfig, seed: int) -> tuple[list[dict[str, Any]], float]:
    """mjlab's own training for ``seconds``, then SIGINT: its curve (``t`` since the command started)."""
    log_dir = Path(tempfile.mkdtemp(prefix="rslrl_own_"))
    cmd = [sys.executable, str(HERE / "own_train.py"), f"task={args.task}", f"num_envs={args.num_envs}",
           "iterations=100000", f"seed={seed}", f"threads={args.threads}", f"log_dir={log_dir}"]
    t0 = time.time()
    p = subprocess.Popen(cmd, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        p.wait(timeout=args.seconds)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    rows = [{"t": w - t0, "frames": (it + 1) * args.num_envs * args.steps, "reward/mean": r}
            for w, it, r in tb_rewards(log_dir)]
    rate = rows[-1]["frames"] / rows[-1]["t"] if rows else 0.0
    return rows, rate


def gmiexp(args: DictConfig, seed: int) -> tuple[list[dict[str, Any]], float]:
    """``train=rslrl`` with ``gmis`` GMIs for ``seconds``, stopped as Ctrl-C stops it: its run rows (run-wide)."""
    run_dir = Path(tempfile.mkdtemp(prefix="rslrl_gmiexp_"))
    t0 = time.time()
    try:
        s = run_for(["train=rslrl", f"task={args.task}", f"gmis_per_gpu={args.gmis}",
                     f"batch.total_envs={args.num_envs}", "max_iterations=100000", f"seed={seed}",
                     "launch.progress=false"], run_dir, args.seconds)
    except RunFailed as e:
        raise SystemExit(f"failed: train=rslrl seed={seed}\n{e}") from e
    start = float(s["started_at"])
    rows = [{**r, "t": start + float(r["wall_s"]) - t0} for r in s["history"]]
    rate = rows[-1]["frames"] / rows[-1]["t"] if rows else 0.0
    return rows, rate


def pair(args: DictConfig, k: int) -> dict[str, Any]:
    seed = int(args.seed) + k
    sides = ("own", "gmiexp") if k % 2 == 0 else ("gmiexp", "own")
    got = {name: (own if name == "own" else gmiexp)(args, seed) for name in sides}
    (a, a_rate), (b, b_rate) = got["own"], got["gmiexp"]
    target = a[-1]["reward/mean"] if a else None
    row = {"pair": k, "seed": seed, "order": "-".join(sides), "own_final": target,
           "own_frames": a[-1]["frames"] if a else 0, "gmiexp_final": value_at(b, args.seconds, x="t"),
           "gmiexp_frames": b[-1]["frames"] if b else 0,
           "own_time": None if target is None else time_to_return(a, target, x="t"),
           "gmiexp_time": None if target is None else time_to_return(b, target, x="t"),
           "own_steps_per_s": a_rate, "gmiexp_steps_per_s": b_rate}
    row["ratio"] = row["own_time"] / row["gmiexp_time"] if row["own_time"] and row["gmiexp_time"] else None
    print(row, flush=True)
    return row


def fmt(v: Any, spec: str = ",.1f") -> str:
    return "-" if v is None else format(v, spec)


@hydra.main(config_path=".", config_name="bench", version_base=None)
def main(args: DictConfig) -> None:
    res = results_dir(args.results_dir, __file__)
    rows = []
    for k in range(args.pairs):
        rows.append(pair(args, k))
        write_csv(rows, res / "rslrl_bench.csv")
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    lines = [f"task={args.task} num_envs={args.num_envs} gmis={args.gmis} seconds={args.seconds} "
             f"pairs={args.pairs} (own: mjlab's train, 1 process, {args.threads} torch thread(s))", "",
             "| pair | order | own return | own frames | gmiexp return | gmiexp frames | own s to own final | "
             "gmiexp s to it | ratio | own env steps/s | gmiexp env steps/s |", "|---:|---|" + "---:|" * 9]
    lines += [f"| {r['pair']} | {r['order']} | {fmt(r['own_final'], '.2f')} | {r['own_frames']:,} | "
              f"{fmt(r['gmiexp_final'], '.2f')} | {r['gmiexp_frames']:,} | {fmt(r['own_time'])} | "
              f"{fmt(r['gmiexp_time'])} | {fmt(r['ratio'], '.2f')} | {fmt(r['own_steps_per_s'], ',.0f')} | "
              f"{fmt(r['gmiexp_steps_per_s'], ',.0f')} |" for r in rows]
    lines += ["", f"gmiexp reached the own run's final return in {len(ratios)} of {len(rows)} pairs; median "
              f"time-to-reward ratio (own / gmiexp) {fmt(statistics.median(ratios) if ratios else None, '.2f')}x"]
    write_report(lines, res / "rslrl_bench.md")


if __name__ == "__main__":
    main()
