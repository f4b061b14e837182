"""Pong (envpool Atari, CNN policy on uint8 frames): gmiexp 2 GMIs against vanilla rl-games at the same total envs.

    python experiments/workloads/pong_bench.py total_envs=64 iterations=50 pairs=3

Vanilla rl-games is ``experiments/baseline_rlgames/run_baseline.py``: one process, rl-games' stock Runner and
agent, the params a gmiexp GMI would get, all ``total_envs`` environments. gmiexp runs tcg_ex with 2 GMIs of
``total_envs / 2`` each. Runs are interleaved in pairs whose order alternates (A-B, B-A, ...), so a drifting
host slows both sides of a pair alike. Reported per pair: env steps/s of each and their ratio (gmiexp /
rl-games), and each run's mean episode reward at equal wall time (the last epoch each reached within the
shorter run's wall time); then the medians. Run it on a quiet machine: the ratio is a timing.

Writes results/pong_bench.csv and results/pong_bench.md (settings: pong_bench.yaml here).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

import hydra
from omegaconf import DictConfig

from gmiexp.rundir import RunFailed, run_gmiexp, run_summary, write_csv, write_report

HERE = Path(__file__).resolve().parent
BASELINE = HERE.parent / "baseline_rlgames" / "run_baseline.py"
RL, GMI = "rl_games (1 process)", "gmiexp 2 GMIs"


def common(args: DictConfig) -> list[str]:
    return [f"task={args.task}", f"max_iterations={args.iterations}", *args.overrides]


def rl_games(args: DictConfig) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(prefix="pong_rlgames_"))
    return run_summary([sys.executable, str(BASELINE), *common(args), f"num_envs={args.total_envs}",
                        f"hydra.run.dir={run_dir}"], run_dir, timeout_s=args.timeout_s)


def gmiexp(args: DictConfig) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(prefix="pong_gmiexp_"))
    return run_gmiexp([*common(args), "layout=tcg_ex", "num_gpus=1", "gmis_per_gpu=2",
                       f"num_envs={args.total_envs // 2}", "launch.progress=false"], run_dir, timeout_s=args.timeout_s)


def reward_at(history: list[dict], wall_s: float) -> float | None:
    """Mean episode reward of the last epoch finished within ``wall_s`` seconds (None: no episode ended yet)."""
    seen = [r.get("reward/mean") for r in history if r["wall_s"] <= wall_s and r.get("reward/mean") is not None]
    return seen[-1] if seen else None


def pair_row(pair: int, a: dict, b: dict) -> dict[str, Any]:
    """One pair: throughputs, their ratio, rewards at the shorter run's wall time."""
    ra, rb = a["metrics"]["perf/env_steps_per_s"], b["metrics"]["perf/env_steps_per_s"]
    equal = min(a["history"][-1]["wall_s"], b["history"][-1]["wall_s"])
    return {"pair": pair, "rl_games_steps_per_s": ra, "gmiexp_steps_per_s": rb, "ratio": rb / ra,
            "equal_wall_s": equal, "rl_games_reward": reward_at(a["history"], equal),
            "gmiexp_reward": reward_at(b["history"], equal)}


@hydra.main(config_path=".", config_name="pong_bench", version_base=None)
def main(args: DictConfig) -> None:
    if args.total_envs % 2:
        raise SystemExit(f"total_envs={args.total_envs} must split evenly over 2 GMIs")
    rows = []
    for pair in range(args.pairs):
        order = [(RL, rl_games), (GMI, gmiexp)] if pair % 2 == 0 else [(GMI, gmiexp), (RL, rl_games)]
        got = {}
        for name, fn in order:
            try:
                got[name] = fn(args)
            except RunFailed as e:
                raise SystemExit(f"failed: {name}\n{e}") from e
            print(f"pair {pair} {name}: {got[name]['metrics']['perf/env_steps_per_s']:,.1f} env steps/s, "
                  f"wall {got[name]['wall_s']:.1f} s", flush=True)
        rows.append(pair_row(pair, got[RL], got[GMI]))
    report(rows, args)


def report(rows: list[dict], args: DictConfig) -> str:
    res = Path(args.results_dir) if args.results_dir else HERE / "results"
    res.mkdir(parents=True, exist_ok=True)
    write_csv(rows, res / "pong_bench.csv")
    fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    lines = [f"task={args.task} total_envs={args.total_envs} iterations={args.iterations} pairs={args.pairs}", "",
             f"| pair | {RL} env steps/s | {GMI} env steps/s | ratio | equal wall s | rl_games reward | "
             "gmiexp reward |", "|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['pair']} | {r['rl_games_steps_per_s']:,.1f} | {r['gmiexp_steps_per_s']:,.1f} | {r['ratio']:.3f} | "
              f"{r['equal_wall_s']:.1f} | {fmt(r['rl_games_reward'])} | {fmt(r['gmiexp_reward'])} |" for r in rows]
    ratios = [r["ratio"] for r in rows]
    rewards = {k: [r[k] for r in rows if r[k] is not None] for k in ("rl_games_reward", "gmiexp_reward")}
    med = {k: f"{median(v):.2f}" if v else "n/a" for k, v in rewards.items()}
    lines += ["", f"median env steps/s ratio (gmiexp 2 GMIs / rl_games): {median(ratios):.3f} "
              f"(pairs {min(ratios):.3f}..{max(ratios):.3f}); median reward at equal wall time: "
              f"rl_games {med['rl_games_reward']}, gmiexp {med['gmiexp_reward']}"]
    return write_report(lines, res / "pong_bench.md")


if __name__ == "__main__":
    main()
