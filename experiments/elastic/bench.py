"""Elastic GMIs: fixed partitions against ``launch.reshape=auto`` starting from 1 GMI, same global batch.

    python experiments/elastic/bench.py                      # Ant, 128 envs in all, 8-minute runs, 3 repetitions
    python experiments/elastic/bench.py duration_s=60 repetitions=1 task=Cartpole   # a quick look

Every run has ``batch.total_envs`` environments in all, so every partition learns the same thing; each trains
for ``duration_s`` and is then stopped as Ctrl-C stops it (the GMIs end their epoch; the summary keeps every
epoch). One repetition runs every fixed partition and the auto run back to back, in an order that rotates each
repetition, so a drifting host slows all of them alike. Reported per repetition: each run's total frames, the
auto run's frames over the best fixed run's and over the 1-GMI run's, each run's mean episode reward at equal
wall time (the shortest run's; the run-wide return) and its final policy's evaluated return (``mode=eval``,
``eval_episodes`` deterministic episodes), pooled over repetitions (seeds) with their spread, and every
re-shape the auto run made with its cost; then the medians. Run it on a quiet machine: the ratios are timings.

Writes results/elastic_bench.csv and results/elastic_bench.md.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from statistics import fmean, median, stdev
from typing import Any

import hydra
from omegaconf import DictConfig

from gmiexp.rundir import RunFailed, evaluate, results_dir, run_for, write_csv, write_report
from gmiexp.stats import value_at


def overrides(args: DictConfig, name: str, rep: int = 0) -> list[str]:
    seed = [f"seed={args.seeds[rep % len(args.seeds)]}"] if args.seeds else []
    base = [f"task={args.task}", f"batch.total_envs={args.total_envs}", f"max_iterations={args.max_iterations}",
            "launch.progress=false", *seed, *args.overrides]
    if name == "auto":
        return [*base, f"gmis_per_gpu={args.auto_start}", "launch.reshape=auto",
                f"launch.reshape_max_gmis_per_gpu={args.max_gmis_per_gpu}", f"launch.reshape_window={args.window}",
                f"launch.reshape_budget={args.budget}"]
    return [*base, f"gmis_per_gpu={name.split('=')[1]}"]


def pooled(vals: list[float | None]) -> str:
    """Mean ± standard deviation over the repetitions (seeds) that have the figure."""
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    return f"{fmean(vals):.2f} ± {stdev(vals) if len(vals) > 1 else 0.0:.2f} (n={len(vals)})"


def repetition(rep: int, runs: dict[str, dict[str, Any]], fixed: list[str]) -> tuple[dict[str, Any], list[dict]]:
    frames = {k: int(s["history"][-1]["frames"]) if s["history"] else 0 for k, s in runs.items()}
    best = max(fixed, key=lambda k: frames[k])
    equal = min(s["history"][-1]["wall_s"] for s in runs.values() if s["history"])
    row: dict[str, Any] = {"rep": rep, "best_fixed": best, "equal_wall_s": equal}
    for k in runs:
        row[f"frames[{k}]"] = frames[k]
        row[f"reward[{k}]"] = value_at(runs[k]["history"], equal, x="wall_s")  # the run-wide return
        row[f"eval[{k}]"] = runs[k].get("eval/return_mean")
    row["auto/best_fixed"] = frames["auto"] / frames[best] if frames[best] else None
    row["auto/fixed1"] = frames["auto"] / frames[fixed[0]] if frames[fixed[0]] else None
    shapes = [{"rep": rep, **{k: r.get(k) for k in ("epoch", "from", "to", "reason", "rate_before", "rate_after",
                                                   "stop_s", "plan_s", "first_epoch_s", "cost_s")}}
              for r in runs["auto"].get("reshapes", [])]
    return row, shapes


@hydra.main(config_path=".", config_name="bench", version_base=None)
def main(args: DictConfig) -> None:
    fixed = [f"fixed={g}" for g in args.fixed]
    names = [*fixed, "auto"]
    rows, shapes = [], []
    for rep in range(args.repetitions):
        order = names[rep % len(names):] + names[:rep % len(names)]
        runs = {}
        for name in order:
            run_dir = Path(tempfile.mkdtemp(prefix=f"elastic_{name.replace('=', '')}_"))
            try:
                runs[name] = run_for(overrides(args, name, rep), run_dir, args.duration_s)
            except RunFailed as e:
                raise SystemExit(f"failed: {name}\n{e}") from e
            if args.eval_episodes:  # the final policy, deterministic episodes: the learning, not the reported window
                ev = evaluate(run_dir, [], args.eval_episodes, args.eval_seed)
                runs[name]["eval/return_mean"] = ev["metrics"]["eval/return_mean"]
            h = runs[name]["history"]
            print(f"rep {rep} {name}: {h[-1]['frames'] if h else 0:,} frames in {h[-1]['wall_s'] if h else 0:.0f} s, "
                  f"{len(runs[name].get('reshapes', []))} re-shapes ({run_dir})", flush=True)
        row, s = repetition(rep, runs, fixed)
        rows.append(row)
        shapes += s
    report(rows, shapes, names, args)


def report(rows: list[dict], shapes: list[dict], names: list[str], args: DictConfig) -> str:
    res = results_dir(args.results_dir, __file__)
    write_csv(rows, res / "elastic_bench.csv")
    if shapes:
        write_csv(shapes, res / "elastic_reshapes.csv")
    f2 = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    f3 = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731  (ratios: 0.8998 is not 0.90)
    lines = [f"task={args.task} total_envs={args.total_envs} duration_s={args.duration_s} "
             f"repetitions={args.repetitions} seeds={list(args.seeds) if args.seeds else 'the config seed'} "
             f"(auto from gmis_per_gpu={args.auto_start}, window {args.window}, budget {args.budget})", "",
             "| rep | " + " | ".join(f"{n} frames" for n in names) + " | best fixed | auto / best fixed | "
             "auto / fixed=1 | equal wall s | " + " | ".join(f"{n} reward" for n in names) + " |",
             "|---:|" + "---:|" * (2 * len(names) + 4)]
    for r in rows:
        lines.append(f"| {r['rep']} | " + " | ".join(f"{r[f'frames[{n}]']:,}" for n in names)
                     + f" | {r['best_fixed']} | {f3(r['auto/best_fixed'])} | {f3(r['auto/fixed1'])} | "
                     f"{r['equal_wall_s']:.0f} | " + " | ".join(f2(r[f'reward[{n}]']) for n in names) + " |")
    med = lambda k: median([r[k] for r in rows if r[k] is not None])  # noqa: E731
    fixed_rewards = [r[f"reward[{n}]"] for r in rows for n in names if n != "auto" and r[f"reward[{n}]"] is not None]
    auto_rewards = [r["reward[auto]"] for r in rows if r["reward[auto]"] is not None]
    lines += ["", f"median auto / best fixed frames: {med('auto/best_fixed'):.3f}; median auto / fixed=1 frames: "
              f"{med('auto/fixed1'):.3f}"]
    if fixed_rewards and auto_rewards:
        inside = min(fixed_rewards) <= median(auto_rewards) <= max(fixed_rewards)
        lines.append(f"reward at equal wall time: fixed runs {min(fixed_rewards):.2f}..{max(fixed_rewards):.2f}, "
                     f"auto median {median(auto_rewards):.2f} ({'inside' if inside else 'outside'} the fixed spread)")
    lines += ["", "| run | reward at equal wall time (run-wide) | evaluated final policy |", "|---|---:|---:|"]
    lines += [f"| {n} | {pooled([r[f'reward[{n}]'] for r in rows])} | {pooled([r[f'eval[{n}]'] for r in rows])} |"
              for n in names]
    if shapes:
        lines += ["", "| rep | epoch | from | to | reason | rate before | rate after | stop s | plan s | "
                  "start to first epoch s | cost s |", "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {s['rep']} | {s['epoch']} | {s['from']} | {s['to']} | {s['reason']} | {f2(s['rate_before'])} | "
                  f"{f2(s['rate_after'])} | {f2(s['stop_s'])} | {f2(s['plan_s'])} | {f2(s['first_epoch_s'])} | "
                  f"{f2(s['cost_s'])} |" for s in shapes]
    return write_report(lines, res / "elastic_bench.md")


if __name__ == "__main__":
    main()
