"""Time to reward, side A against side B, on the run-wide return, with each final policy evaluated.

    python experiments/time_to_reward/run.py study=vanilla_ant           # rl-games 1x64 vs gmiexp 2x32, Ant
    python experiments/time_to_reward/run.py study=fig9_cartpole         # Fig. 9 on CPU: 1x8192 vs 2x4096
    python experiments/time_to_reward/run.py study=vanilla_ant seeds=[1] study.epochs=3 eval_episodes=2  # a look

One pair per seed, interleaved (A-B for even pairs, B-A for odd), so a drifting host slows both sides alike. Per
pair: the target (the study's ``threshold``, else A's final return: the run-wide ``reward/mean`` of its last
epoch), the seconds (from the command's start,
start-up included) and frames each side took to reach it, and their ratios (A / B: above 1, B got there
sooner); each side's return at equal frames (the fewer of the two runs'); each final policy's return over
``eval_episodes`` deterministic episodes (``mode=eval``). Then the medians over pairs, the pooled evaluations
(mean and standard deviation over seeds) and each side's env steps/s per pair (how noisy the host was).
Also when each side's first epoch ended, and B's time to the target less its later first epoch (what B's longer
start-up costs). Writes results/<study>.csv, _curves.csv (every run's rows), .md and .png (reward against wall
time, every seed). Settings: time_to_reward.yaml.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import plt, save  # noqa: E402

from gmiexp.rundir import RunFailed, evaluate, results_dir, run_gmiexp, run_summary, write_csv, write_report  # noqa: E402
from gmiexp.stats import time_to_return, value_at  # noqa: E402

HERE = Path(__file__).resolve().parent
RUN_FILE = HERE.parent / "baseline_rlgames" / "run_file.py"


def train(side: DictConfig, seed: int) -> dict[str, Any]:
    """One run of a side; its rows get ``t``: seconds since the command started."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"ttr_{side.runner}_"))
    args = [*side.args, f"seed={seed}"]
    t_cmd = time.time()
    try:
        if side.runner == "gmiexp":
            s = run_gmiexp([*args, "launch.progress=false"], run_dir)
            start = float(s["started_at"])
            rows = [{**r, "t": start + float(r["wall_s"]) - t_cmd} for r in s["history"]]
        else:  # vanilla rl-games on a file: its rows carry the epoch's end time
            s = run_summary([sys.executable, str(RUN_FILE), *args, f"hydra.run.dir={run_dir}"], run_dir)
            rows = [{**r, "t": float(r["time"]) - t_cmd} for r in s["history"]]
    except RunFailed as e:
        raise SystemExit(f"failed: {side.label} seed={seed}\n{e}") from e
    rate = s["metrics"]["perf/env_steps_per_s"]
    print(f"{side.label} seed={seed}: {len(rows)} epochs, return {rows[-1].get('reward/mean')}, "
          f"{rate:,.0f} env steps/s", flush=True)
    return {"run_dir": run_dir, "rows": rows, "rate": rate}


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def pair(args: DictConfig, seed: int, a_first: bool) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    study = args.study
    runs: dict[str, dict[str, Any]] = {}
    for name in ("a", "b") if a_first else ("b", "a"):
        runs[name] = train(study[name], seed)
    if args.eval_episodes:
        for name, run in runs.items():
            overrides = list(study.eval) if study[name].runner != "gmiexp" else []
            ev = evaluate(run["run_dir"], overrides, args.eval_episodes, args.eval_seed)
            run["eval"] = ev["metrics"]["eval/return_mean"]
    a, b = runs["a"]["rows"], runs["b"]["rows"]
    target = study.threshold if study.get("threshold") is not None else a[-1].get("reward/mean")
    frames = min(a[-1]["frames"], b[-1]["frames"])
    row = {"seed": seed, "order": "A-B" if a_first else "B-A", "target": target, "a_final": a[-1].get("reward/mean"),
           "b_final": b[-1].get("reward/mean"),
           "a_time": time_to_return(a, target, x="t"), "b_time": time_to_return(b, target, x="t"),
           "a_frames": time_to_return(a, target, x="frames"), "b_frames": time_to_return(b, target, x="frames"),
           "equal_frames": frames, "a_at_frames": value_at(a, frames), "b_at_frames": value_at(b, frames),
           "a_eval": runs["a"].get("eval"), "b_eval": runs["b"].get("eval"),
           "a_rate": runs["a"]["rate"], "b_rate": runs["b"]["rate"]}
    row["a_first"], row["b_first"] = a[0]["t"], b[0]["t"]  # the first epoch's end, seconds after the command
    late = row["b_first"] - row["a_first"]  # B's later start: what the time to the target would be without it
    row["b_time_same_start"] = row["b_time"] - late if row["b_time"] is not None else None
    row["time_ratio"] = ratio(row["a_time"], row["b_time"])
    row["same_start_ratio"] = ratio(row["a_time"], row["b_time_same_start"])
    row["frames_ratio"] = ratio(row["a_frames"], row["b_frames"])
    return row, runs


def fmt(v: Any, spec: str = ",.1f") -> str:
    return "-" if v is None else format(v, spec)


def med(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rows if r[key] is not None]
    return statistics.median(vals) if vals else None


def spread(vals: list[float]) -> str:
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return f"{statistics.fmean(vals):,.1f} ± {sd:,.1f} (n={len(vals)})"


def report(args: DictConfig, rows: list[dict[str, Any]], res: Path) -> None:
    a, b = args.study.a.label, args.study.b.label
    goal = f"return {args.study.threshold}" if args.study.get("threshold") is not None else "A's final return"
    lines = [f"study={args.study.name}: A = {a}, B = {b}; seeds {list(args.seeds)}; "
             f"evaluation: {args.eval_episodes} deterministic episodes; target: {goal}", "",
             "| seed | order | target | A s to it | B s to it | A/B time | A frames to it | B frames to it "
             "| A/B frames | A at equal frames | B at equal frames | A eval | B eval | A env steps/s | B env steps/s |",
             "|---:|:---:|" + "---:|" * 13]
    for r in rows:
        lines.append(f"| {r['seed']} | {r['order']} | {fmt(r['target'])} | {fmt(r['a_time'])} | {fmt(r['b_time'])} | "
                     f"{fmt(r['time_ratio'], '.2f')} | {fmt(r['a_frames'], ',.0f')} | {fmt(r['b_frames'], ',.0f')} | "
                     f"{fmt(r['frames_ratio'], '.2f')} | {fmt(r['a_at_frames'])} | {fmt(r['b_at_frames'])} | "
                     f"{fmt(r['a_eval'])} | {fmt(r['b_eval'])} | {fmt(r['a_rate'], ',.0f')} | "
                     f"{fmt(r['b_rate'], ',.0f')} |")
    reached = sum(r["b_time"] is not None for r in rows)
    every = statistics.median([r["time_ratio"] or 0.0 for r in rows])  # a pair B never reached counts as 0
    rate_ratios = [r["b_rate"] / r["a_rate"] for r in rows if r["a_rate"]]
    lines += ["", f"* B reached the target in {reached} of {len(rows)} pairs; median A/B time to it "
              f"{fmt(med(rows, 'time_ratio'), '.2f')}x, frames {fmt(med(rows, 'frames_ratio'), '.2f')}x "
              f"(above 1: B sooner); over all {len(rows)} pairs, one B never reached counting as 0: {every:.2f}x",
              f"* return at equal frames: A {spread([r['a_at_frames'] for r in rows])}, "
              f"B {spread([r['b_at_frames'] for r in rows])}",
              f"* final run-wide return: A {spread([r['a_final'] for r in rows])}, "
              f"B {spread([r['b_final'] for r in rows])}",
              f"* evaluated final policies: A {spread([r['a_eval'] for r in rows])}, "
              f"B {spread([r['b_eval'] for r in rows])}",
              f"* B/A env steps/s per pair: {', '.join(f'{x:.2f}' for x in rate_ratios)} (median "
              f"{fmt(statistics.median(rate_ratios) if rate_ratios else None, '.2f')}); A's own rate ranged "
              f"{fmt(min(r['a_rate'] for r in rows), ',.0f')}-{fmt(max(r['a_rate'] for r in rows), ',.0f')}",
              f"* first epoch ended (s after the command): A median {fmt(med(rows, 'a_first'))} "
              f"({fmt(min(r['a_first'] for r in rows))}-{fmt(max(r['a_first'] for r in rows))}), B median "
              f"{fmt(med(rows, 'b_first'))} ({fmt(min(r['b_first'] for r in rows))}-"
              f"{fmt(max(r['b_first'] for r in rows))}); B's time to the target less its later first epoch: median "
              f"A/B {fmt(med(rows, 'same_start_ratio'), '.2f')}x (with it {fmt(med(rows, 'time_ratio'), '.2f')}x)"]
    write_report(lines, res / f"{args.study.name}.md")


def plot(args: DictConfig, runs: list[dict[str, dict[str, Any]]], res: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, color in (("a", "tab:gray"), ("b", "tab:blue")):
        for i, pr in enumerate(runs):
            pts = [(r["t"], r["reward/mean"]) for r in pr[name]["rows"] if r.get("reward/mean") is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), color=color, alpha=0.7,
                        label=args.study[name].label if i == 0 else None)
    ax.set_xlabel("seconds since the command started")
    ax.set_ylabel("run-wide reward/mean")
    ax.set_title(f"{args.study.name}: {len(runs)} seeds")
    ax.legend()
    save(fig, res / f"{args.study.name}.png")


@hydra.main(config_path=".", config_name="time_to_reward", version_base=None)
def main(args: DictConfig) -> None:
    print(OmegaConf.to_yaml(args.study), flush=True)
    res = results_dir(args.results_dir, __file__)
    rows, runs = [], []
    for k, seed in enumerate(args.seeds):
        row, pr = pair(args, int(seed), a_first=k % 2 == 0)
        rows.append(row)
        runs.append(pr)
        write_csv(rows, res / f"{args.study.name}.csv")
        write_csv([{"seed": r["seed"], "side": name, "t": c["t"], "frames": c["frames"],
                    "reward": c.get("reward/mean")} for r, pr in zip(rows, runs, strict=True)
                   for name in ("a", "b") for c in pr[name]["rows"]], res / f"{args.study.name}_curves.csv")
    report(args, rows, res)
    plot(args, runs, res)


if __name__ == "__main__":
    main()
