"""G GMIs are one learner: 1, 2 and 4 GMIs at the same global batch learn alike, paired by seed.

    python experiments/equivalence/run.py                    # rl-games' Ant file and mjlab's Cartpole (rsl_rl)
    python experiments/equivalence/run.py '~tasks.cartpole'  # Ant only

A partition may change how fast training runs, never what it learns. Every task of equivalence.yaml runs once per
seed and partition (``gmis_per_gpu``) at the same ``batch.total_envs`` (the minibatch is then the whole batch's
whatever the partition) and the same epochs; each seed runs the partitions in an order rotated by its index, so a
drifting host slows each alike. Per run: its run-wide return curve (``reward/mean`` of summary.json's history
against frames), its return at equal frames (the fewest frames any of the seed's runs of that task reached) and its
final policy over ``eval_episodes`` deterministic episodes (``mode=eval``, rl-games' and rsl_rl's checkpoints alike;
a checkpoint ``mode=eval`` refuses with exit 2 is recorded as not evaluated). Then, per task and measure, the paired
differences of every partition to the first (2 - 1, 4 - 1), seed by seed, their mean with a 95% t interval, and
whether 0 lies inside.
Writes results/equivalence.csv (one row per run), equivalence_curves.csv (every run's curve), equivalence.md and
equivalence.png (return against frames, one panel per task, one colour per partition; seeds thin, their mean thick).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import fmt, interval_text, plt, save, spread  # noqa: E402

from gmiexp.rundir import RunFailed, evaluated, results_dir, run_gmiexp, write_csv, write_report  # noqa: E402
from gmiexp.stats import mean_curve, mean_interval, paired_differences, rotated, value_at  # noqa: E402

NAME = "equivalence"
MEASURES = {"at_equal_frames": "return at equal frames", "eval": "evaluated final policy"}
COLOURS = ("tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:red")


def train(args: DictConfig, name: str, gmis: int, seed: int) -> dict[str, Any]:
    """One run of task ``name`` on ``gmis`` GMIs, then its evaluation: its curve, rate and seconds."""
    task = args.tasks[name]
    run_dir = Path(tempfile.mkdtemp(prefix=f"{NAME}_{name}_{gmis}_"))
    cmd = [*task.args, f"batch.total_envs={task.total_envs}", f"gmis_per_gpu={gmis}",
           f"max_iterations={task.epochs}", f"seed={seed}", "launch.progress=false"]
    t0 = time.time()
    try:
        s = run_gmiexp(cmd, run_dir)
    except RunFailed as e:
        raise SystemExit(f"failed: {name} gmis={gmis} seed={seed}\n{e}") from e
    t1 = time.time()
    try:
        ev, note = evaluated(run_dir, int(args.eval_episodes), int(args.eval_seed))
    except RunFailed as e:
        raise SystemExit(f"failed: mode=eval of {run_dir}\n{e}") from e
    curve = [(float(r["frames"]), float(r["reward/mean"])) for r in s["history"]
             if r.get("frames") is not None and r.get("reward/mean") is not None]
    rate = float(s["metrics"]["perf/env_steps_per_s"])
    print(f"{name} gmis={gmis} seed={seed}: {len(s['history'])} epochs, return {curve[-1][1] if curve else None}, "
          f"eval {ev if ev is not None else note}, {rate:,.0f} env steps/s, {t1 - t0:.0f} s + eval "
          f"{time.time() - t1:.0f} s", flush=True)
    return {"curve": curve, "frames": float(s["history"][-1]["frames"]) if s["history"] else 0.0,
            "final": curve[-1][1] if curve else None, "eval": ev, "eval_note": note, "rate": rate,
            "train_s": t1 - t0, "eval_s": time.time() - t1, "run_dir": str(run_dir)}


def seed_runs(args: DictConfig, name: str, seed: int, k: int) -> list[dict[str, Any]]:
    """Every partition of task ``name`` for one seed, in seed k's order; each row with its return at equal frames."""
    gmis = [int(g) for g in args.gmis]
    runs = {g: train(args, name, g, seed) for g in rotated(gmis, k)}
    equal = min(r["frames"] for r in runs.values())
    rows = []
    for g, r in runs.items():
        pts = [{"frames": f, "reward/mean": v} for f, v in r["curve"]]
        rows.append({"task": name, "seed": seed, "gmis": g, "order": "-".join(map(str, rotated(gmis, k))),
                     "frames": r["frames"], "final": r["final"], "equal_frames": equal,
                     "at_equal_frames": value_at(pts, equal), "eval": r["eval"], "eval_note": r["eval_note"],
                     "env_steps_per_s": r["rate"], "train_s": round(r["train_s"], 1), "eval_s": round(r["eval_s"], 1),
                     "run_dir": r["run_dir"], "curve": r["curve"]})
    return rows


def differences(rows: list[dict[str, Any]], task: str, measure: str, ref: int, g: int) -> list[float]:
    """``measure`` of ``g`` GMIs minus that of ``ref`` GMIs, seed by seed (seeds where both have it)."""
    return paired_differences({(r["seed"], r["gmis"]): r[measure] for r in rows if r["task"] == task}, ref, g)


def paired(rows: list[dict[str, Any]], tasks: list[str], gmis: list[int]) -> list[dict[str, Any]]:
    """One row per task, measure and partition: its paired differences to the first partition, their interval."""
    out = []
    for task in tasks:
        for measure in MEASURES:
            for g in gmis[1:]:
                d = differences(rows, task, measure, gmis[0], g)
                iv = mean_interval(d) if d else None
                out.append({"task": task, "measure": measure, "pair": f"{g} - {gmis[0]}", "n": len(d),
                            "differences": d, "mean": iv.mean if iv else None, "low": iv.low if iv else None,
                            "high": iv.high if iv else None, "zero_inside": iv.contains(0.0) if iv else None})
    return out


def interval(p: dict[str, Any]) -> str:
    return interval_text(p["low"], p["high"])


def inside(p: dict[str, Any]) -> str:
    if p["n"] == 0:
        return "not evaluated" if p["measure"] == "eval" else "-"
    return {True: "yes", False: "**no**", None: "- (one seed)"}[p["zero_inside"]]


def report(args: DictConfig, rows: list[dict[str, Any]], pairs: list[dict[str, Any]], took_s: float,
           res: Path) -> None:
    gmis = [int(g) for g in args.gmis]
    lines = [f"G GMIs are one learner: partitions {gmis} at the same global batch, seeds {list(args.seeds)} "
             f"(interleaved; the order rotates with the seed); evaluation: {args.eval_episodes} deterministic "
             f"episodes; the whole study took {took_s:,.0f} s", ""]
    for name in args.tasks:
        t = args.tasks[name]
        lines.append(f"* {name}: {t.label}, batch.total_envs={t.total_envs}, {t.epochs} epochs ({' '.join(t.args)})")
    lines += ["", "| task | seed | GMIs | order | frames | final return | return at equal frames | eval | "
              "env steps/s | train s | eval s |", "|:---|---:|---:|:---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['task']} | {r['seed']} | {r['gmis']} | {r['order']} | {fmt(r['frames'], ',.0f')} | "
              f"{fmt(r['final'])} | {fmt(r['at_equal_frames'])} | {fmt(r['eval'])} | "
              f"{fmt(r['env_steps_per_s'], ',.0f')} | {r['train_s']} | {r['eval_s']} |" for r in rows]
    lines += ["", "Paired differences (seed by seed; their mean and 95% t interval; where 0 is inside, no effect of "
              "the partition is measured):", "",
              "| task | measure | pair | per seed | mean | 95% interval | 0 inside |",
              "|:---|:---|:---|:---|---:|:---|:---|"]
    lines += [f"| {p['task']} | {MEASURES[p['measure']]} | {p['pair']} | "
              f"{', '.join(f'{d:+.2f}' for d in p['differences']) or '-'} | {fmt(p['mean'], '+,.2f')} | "
              f"{interval(p)} | {inside(p)} |"
              for p in pairs]
    lines.append("")
    for name in args.tasks:
        mine = [r for r in rows if r["task"] == name]
        for g in gmis:
            sel = [r for r in mine if r["gmis"] == g]
            lines.append(f"* {name}, {g} GMI(s): return at equal frames {spread([r['at_equal_frames'] for r in sel])}; "
                         f"evaluated {spread([r['eval'] for r in sel])}; env steps/s "
                         f"{spread([r['env_steps_per_s'] for r in sel], ',.0f')}")
        notes = sorted({r["eval_note"] for r in mine if r["eval_note"] != "ok"})
        lines += [f"* {name}: {n}" for n in notes]
        if mine:
            lines.append(f"* {name}: {statistics.fmean(r['train_s'] for r in mine):,.0f} s a run, "
                         f"{statistics.fmean(r['eval_s'] for r in mine):,.0f} s an evaluation (means)")
    write_report(lines, res / f"{NAME}.md")


def plot(args: DictConfig, rows: list[dict[str, Any]], res: Path) -> None:
    tasks = list(args.tasks)
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
    for ax, name in zip(axes[0], tasks, strict=True):
        for g, colour in zip([int(g) for g in args.gmis], COLOURS, strict=False):
            curves = [r["curve"] for r in rows if r["task"] == name and r["gmis"] == g]
            for c in curves:
                if c:
                    ax.plot(*zip(*c, strict=True), color=colour, alpha=0.35, linewidth=0.8, marker=".", markersize=3)
            mean = mean_curve(curves)
            if mean:
                ax.plot(*zip(*mean, strict=True), color=colour, linewidth=2.2, marker="o", markersize=3,
                        label=f"{g} GMI(s), mean of {len(curves)}")
        ax.set_xlabel("frames")
        ax.set_ylabel("run-wide reward/mean")
        ax.set_title(f"{name}: {args.tasks[name].label}", fontsize=9)
        ax.legend(fontsize=8)
    save(fig, res / f"{NAME}.png")


def write_tables(rows: list[dict[str, Any]], res: Path) -> None:
    write_csv([{k: v for k, v in r.items() if k != "curve"} for r in rows], res / f"{NAME}.csv")
    write_csv([{"task": r["task"], "seed": r["seed"], "gmis": r["gmis"], "frames": f, "reward_mean": v}
               for r in rows for f, v in r["curve"]], res / f"{NAME}_curves.csv",
              fieldnames=["task", "seed", "gmis", "frames", "reward_mean"])


@hydra.main(config_path=".", config_name="equivalence", version_base=None)
def main(args: DictConfig) -> None:
    res = results_dir(args.results_dir, __file__)
    t0 = time.time()
    rows: list[dict[str, Any]] = []
    for k, seed in enumerate(args.seeds):
        for name in args.tasks:
            rows += seed_runs(args, name, int(seed), k)
            write_tables(rows, res)
    report(args, rows, paired(rows, list(args.tasks), [int(g) for g in args.gmis]), time.time() - t0, res)
    plot(args, rows, res)


if __name__ == "__main__":
    main()
