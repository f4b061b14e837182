"""Comparison report of runs: ``python -m gmiexp.tools.report <multirun dir> [--out DIR] [--baseline K=V]``.

Reads every ``summary.json`` below the directory, or with ``--wandb-group G``
every W&B run of that group (the launcher logs summary.json's metrics under
the same names, :mod:`gmiexp.launch.wandb_sink`), and writes ``report.md`` with PNG plots
and ``runs.csv`` (one row per run) and ``groups.csv``. Runs that differ only in
``seed`` form a group: tables and plots show each group's mean ± std and count
(throughput against a baseline group, return against env steps, memory), and a
run far from its group (env steps/s under half or over twice the group's median)
is flagged as an outlier. Returns are the run-wide ``reward/mean`` (every GMI's last episodes, so runs of
different partitions compare alike); each group also shows the time its runs took to reach a return
(``--return-threshold``, default: the lowest group's mean final return, a return every group reaches on
average) and, where runs were evaluated (``--eval-episodes N`` plays each final policy ``N`` deterministic
episodes with ``mode=eval`` into ``<run>/eval``; an earlier evaluation there is read back), the evaluated
return: the policy learned, not the window the run reported. With W&B online it also creates a W&B report of the
same runs (package ``wandb-workspaces``) whose panels put the summary metrics
side by side; offline it says so and the local report stands alone.
"""

from __future__ import annotations

import argparse
import csv
import json
import netrc
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gmiexp.pack import table as pack_table  # noqa: E402  (a packed sweep's table: makespan, slots)
from gmiexp.pbt import views as pbt_views  # noqa: E402  (a population's members, lineage and curves)
from gmiexp.rundir import RunFailed, evaluate, on_device, peak_memory_mb  # noqa: E402
from gmiexp.stats import time_to_return  # noqa: E402

CONFIG_KEYS = ("task", "layout", "backend", "reduction", "num_gpus", "gmis_per_gpu", "num_envs",
               "max_iterations", "seed", "experiment")
STEPS = "perf/env_steps_per_s"
OUTLIER_FACTOR = 2.0  # a run below median/2 or above 2*median of its group's env steps/s is an outlier


@dataclass
class Run:
    """One finished run: where it is, its summary, and a label built from what differs between runs."""

    path: Path
    summary: dict[str, Any]
    label: str = ""
    evaluation: dict[str, Any] | None = None  # the final policy's ``mode=eval`` summary (``<run>/eval``)
    time_to_return: float | None = None  # wall seconds to the report's return threshold (None: not reached)

    @property
    def eval_return(self) -> float | None:
        return (self.evaluation or {}).get("metrics", {}).get("eval/return_mean")

    @property
    def config(self) -> dict[str, Any]:
        return self.summary.get("config", {})

    @property
    def metrics(self) -> dict[str, Any]:
        return self.summary.get("metrics", {})

    @property
    def ok(self) -> bool:
        return self.summary.get("status") == "ok"

    @property
    def steps_per_s(self) -> float:
        return float(self.metrics.get(STEPS) or 0.0)

    @property
    def peak_mem_mb(self) -> float:
        return peak_memory_mb(self.metrics)

    @property
    def group_key(self) -> str:
        return json.dumps({k: self.config.get(k) for k in CONFIG_KEYS if k != "seed"}, sort_keys=True)


@dataclass
class Group:
    """Runs with the same config but for ``seed``: pooled as mean ± std over its ok runs."""

    label: str
    runs: list[Run]

    @property
    def ok(self) -> list[Run]:
        return [r for r in self.runs if r.ok]

    def stat(self, value: Any) -> tuple[float | None, float | None, int]:
        """Mean, sample std (0 for one run) and count of ``value(run)`` over the ok runs that have it."""
        vals = [float(v) for v in (value(r) for r in self.ok) if v is not None]
        if not vals:
            return None, None, 0
        mean = sum(vals) / len(vals)
        std = (sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5 if len(vals) > 1 else 0.0
        return mean, std, len(vals)

    def outliers(self) -> list[Run]:
        """Ok runs whose env steps/s is under 1/OUTLIER_FACTOR or over OUTLIER_FACTOR times the group's median."""
        rates = sorted(r.steps_per_s for r in self.ok)
        if len(rates) < 3:
            return []
        mid = rates[len(rates) // 2] if len(rates) % 2 else (rates[len(rates) // 2 - 1] + rates[len(rates) // 2]) / 2
        return [r for r in self.ok if mid > 0 and not mid / OUTLIER_FACTOR <= r.steps_per_s <= mid * OUTLIER_FACTOR]


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Groups in the order of their first run, labelled by the config keys (but seed) that differ between groups."""
    by: dict[str, list[Run]] = {}
    for r in runs:
        by.setdefault(r.group_key, []).append(r)
    keys = [k for k in varying_keys(runs) if k != "seed"]
    groups = []
    for members in by.values():
        c = members[0].config
        groups.append(Group(" ".join(f"{k}={c.get(k)}" for k in keys) or "all runs", members))
    return groups


def job_order(path: Path) -> tuple:
    """Multirun job numbers sort numerically (2 before 10)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in path.parts)


def load_runs(root: Path) -> list[Run]:
    """Every run below ``root``; an evaluation (``mode=eval`` summary in ``<run>/eval``) joins its run."""
    runs, evals = [], {}
    for path in sorted(root.rglob("summary.json"), key=job_order):
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            print(f"report: skipping {path}: {e}", file=sys.stderr)
            continue
        if summary.get("mode") == "eval":
            evals[path.parent.parent] = summary
        elif pbt_views.is_population(path.parent):
            continue  # a population's own summary: its members' lives are the runs, its section says the rest
        else:
            runs.append(Run(path.parent, summary))
    for r in runs:
        r.evaluation = evals.get(r.path)
    label_runs(runs)
    return runs


def evaluate_runs(runs: Sequence[Run], episodes: int) -> None:
    """Play each ok run's final policy ``episodes`` deterministic episodes (runs evaluated before are kept)."""
    for r in runs:
        if r.ok and r.evaluation is None:
            try:
                r.evaluation = evaluate(r.path, episodes=episodes)
            except RunFailed as e:
                print(f"report: cannot evaluate {r.path}: {e.why}", file=sys.stderr)


def return_threshold(groups: Sequence[Group], given: float | None) -> float | None:
    """``given``, else the lowest group mean of the final run-wide return (a return every group reaches)."""
    if given is not None:
        return given
    means = [m for m, _, _ in (g.stat(lambda r: r.metrics.get("reward/mean")) for g in groups) if m is not None]
    return min(means) if means else None


def time_runs(runs: Sequence[Run], threshold: float | None) -> None:
    for r in runs:
        r.time_to_return = None if threshold is None else time_to_return(r.summary.get("history", []), threshold)


def wandb_summary(run: Any) -> dict[str, Any]:
    """A W&B run (``wandb.Api().runs`` item) in summary.json's shape: the launcher logged it under these names."""
    sm = dict(run.summary_metrics)
    history = [dict(h) for h in run.scan_history(keys=["wall_s", "reward/mean"])]
    return {"status": sm.get("status", run.state), "wall_s": sm.get("wall_s", 0.0), "plan_id": sm.get("plan_id"),
            "run_dir": run.url, "config": {k: run.config[k] for k in CONFIG_KEYS if k in run.config},
            "metrics": {k: v for k, v in sm.items() if "/" in k and not k.startswith("_")}, "history": history}


def load_wandb_runs(group: str, project: str, entity: str | None, api: Any = None) -> list[Run]:
    """The runs of one W&B group (a multirun's experiment), oldest first."""
    if api is None:
        online, why = wandb_online()
        if not online:
            raise SystemExit(f"report: --wandb-group reads runs from W&B, which needs it online ({why})")
        import wandb

        api = wandb.Api()
    found = api.runs(f"{entity}/{project}" if entity else project, filters={"group": group}, order="+created_at")
    runs = [Run(Path(r.name), wandb_summary(r)) for r in found]
    label_runs(runs)
    return runs


def varying_keys(runs: Sequence[Run]) -> list[str]:
    return [k for k in CONFIG_KEYS if len({json.dumps(r.config.get(k)) for r in runs}) > 1]


def label_runs(runs: Sequence[Run]) -> None:
    """Label each run by the config keys that differ across runs (its directory name if none do)."""
    keys = varying_keys(runs)
    for r in runs:
        r.label = " ".join(f"{k}={r.config.get(k)}" for k in keys) or r.path.name


def parse_selector(items: Sequence[str]) -> dict[str, str]:
    sel = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"report: --baseline expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        sel[k] = v
    return sel


def pick_baseline(runs: Sequence[Run], selector: dict[str, str]) -> Run:
    """The first ok run matching ``selector`` (config values compared as strings); default: fewest GMIs."""
    ok = [r for r in runs if r.ok] or list(runs)
    if not selector:
        return min(ok, key=lambda r: r.config.get("num_gpus", 1) * r.config.get("gmis_per_gpu", 1))
    for r in ok:
        if all(str(r.config.get(k)) == v for k, v in selector.items()):
            return r
    raise SystemExit(f"report: no run matches --baseline {selector}; labels: {[r.label for r in runs]}")


def plot_throughput(groups: Sequence[Group], base: Group, out: Path) -> Path:
    """Mean env steps/s per group (bar, ± std), each run a dot (outliers red), the ratio to the baseline group."""
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(groups) + 2), 4.5))
    base_mean = base.stat(lambda r: r.steps_per_s)[0] or 0.0
    means, stds, ns = zip(*(g.stat(lambda r: r.steps_per_s) for g in groups), strict=True)
    heights = [m or 0.0 for m in means]
    bars = ax.bar(range(len(groups)), heights, yerr=[s or 0.0 for s in stds], capsize=4,
                  color=["tab:gray" if g is base else "tab:blue" for g in groups])
    ax.bar_label(bars, labels=[f"{h / base_mean:.2f}x, n={n}" if base_mean else f"n={n}"
                               for h, n in zip(heights, ns, strict=True)], fontsize=8, padding=2)
    for i, g in enumerate(groups):
        bad = {id(r) for r in g.outliers()}
        for r in g.ok:
            ax.plot(i, r.steps_per_s, "x" if id(r) in bad else ".", color="tab:red" if id(r) in bad else "k", ms=6)
    ax.set_xticks(range(len(groups)), [g.label for g in groups], rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("group (runs that differ only in seed)")
    ax.set_ylabel("env steps/s (mean ± std over seeds)")
    ax.set_title(f"Throughput, ratio to the baseline group (grey: {base_mean:,.0f} env steps/s)\n"
                 "dots: runs; red x: outlier (under half or over twice its group's median)", fontsize=9)
    return save(fig, out / "throughput.png")


def plot_rewards(groups: Sequence[Group], out: Path) -> Path:
    """Mean episode return against env steps per group, ± std over its runs (rows aligned by iteration)."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for g in groups:
        curves = [[(h["frames"], h["reward/mean"]) for h in r.summary.get("history", [])
                   if h.get("reward/mean") is not None and "frames" in h] for r in g.ok]
        curves = [c for c in curves if c]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        xs = [sum(c[i][0] for c in curves) / len(curves) for i in range(n)]
        ys = [[c[i][1] for c in curves] for i in range(n)]
        mean = [sum(v) / len(v) for v in ys]
        std = [(sum((x - m) ** 2 for x in v) / (len(v) - 1)) ** 0.5 if len(v) > 1 else 0.0
               for v, m in zip(ys, mean, strict=True)]
        (line,) = ax.plot(xs, mean, lw=1.2, label=f"{g.label} (n={len(curves)})")
        ax.fill_between(xs, [m - s for m, s in zip(mean, std, strict=True)],
                        [m + s for m, s in zip(mean, std, strict=True)], color=line.get_color(), alpha=0.2)
    ax.set_xlabel("env steps (frames)")
    ax.set_ylabel("mean episode return")
    ax.set_title("Return against env steps (mean ± std over seeds)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    return save(fig, out / "reward.png")


def plot_memory(groups: Sequence[Group], out: Path) -> Path:
    """Per group: the GMIs' peak RSS and the memory the workload added (or NVML's device memory), mean ± std."""
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(groups) + 2), 4))
    gpu = any(on_device(r.metrics) for g in groups for r in g.runs)
    series = [("peak RSS of a GMI process", lambda r: r.metrics.get("mem/peak_rss_mb"), "tab:orange"),
              ("GPU memory per GMI (NVML peak)" if gpu else "memory the workload added (RSS growth)",
               lambda r: r.peak_mem_mb, "tab:green")]
    width = 0.4
    for j, (name, value, color) in enumerate(series):
        stats = [g.stat(value) for g in groups]
        ax.bar([i + (j - 0.5) * width for i in range(len(groups))], [m or 0.0 for m, _, _ in stats], width,
               yerr=[s or 0.0 for _, s, _ in stats], capsize=3, color=color, label=name)
    ax.set_xticks(range(len(groups)), [g.label for g in groups], rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("group (runs that differ only in seed)")
    ax.set_ylabel("memory (MB, mean ± std over seeds)")
    ax.set_title("Memory")
    ax.legend(fontsize=7)
    return save(fig, out / "memory.png")


def plot_reshapes(runs: Sequence[Run], out: Path) -> Path | None:
    """Each re-shaped run's per-epoch env steps/s against wall time, its re-shapes marked (None: no run re-shaped)."""
    shaped = [r for r in runs if r.summary.get("reshapes")]
    if not shaped:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in shaped:
        hist = [h for h in r.summary.get("history", []) if "perf/epoch_env_steps_per_s" in h]
        (line,) = ax.plot([h["wall_s"] for h in hist], [h["perf/epoch_env_steps_per_s"] for h in hist], lw=1,
                          label=r.label or r.path.name)
        t0 = float(r.summary.get("started_at") or 0.0)
        for rec in r.summary["reshapes"]:
            at = float(rec.get("started_at", t0)) - t0
            ax.axvline(at, color=line.get_color(), ls=":", lw=1)
            ax.annotate(f"{rec['from']}->{rec['to']}", (at, ax.get_ylim()[1]), fontsize=7, rotation=90,
                        va="top", ha="right", color=line.get_color())
    ax.set_xlabel("wall time since the run started (s)")
    ax.set_ylabel("env steps/s (each epoch)")
    ax.set_title("Throughput of re-shaped runs; dotted: a re-shape (GMIs per GPU from->to)")
    ax.legend(fontsize=7)
    return save(fig, out / "reshapes.png")


def save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def rows(runs: Sequence[Run], base: Run, groups: Sequence[Group] = ()) -> list[dict[str, Any]]:
    """One row per run (runs.csv): its own figures, its group and whether it is an outlier there."""
    where = {id(r): g for g in groups for r in g.runs}
    flagged = {id(r) for g in groups for r in g.outliers()}
    return [{"label": r.label, "status": r.summary.get("status"), "env_steps_per_s": round(r.steps_per_s, 1),
             "vs_baseline": round(r.steps_per_s / base.steps_per_s, 3) if base.steps_per_s else None,
             "reward_mean": r.metrics.get("reward/mean"), "time_to_return_s": r.time_to_return,
             "eval_return": r.eval_return, "peak_rss_mb": r.metrics.get("mem/peak_rss_mb"),
             "workload_mb": r.metrics.get("mem/workload_mb"), "peak_mem_mb": round(r.peak_mem_mb, 1),
             "wall_s": round(float(r.summary.get("wall_s", 0.0)), 2),
             "group": where[id(r)].label if id(r) in where else "", "outlier": id(r) in flagged,
             "run_dir": str(r.path)} for r in runs]


GROUP_FIGURES = (("env_steps_per_s", lambda r: r.steps_per_s), ("reward_mean", lambda r: r.metrics.get("reward/mean")),
                 ("time_to_return_s", lambda r: r.time_to_return), ("eval_return", lambda r: r.eval_return),
                 ("peak_rss_mb", lambda r: r.metrics.get("mem/peak_rss_mb")),
                 ("workload_mb", lambda r: r.metrics.get("mem/workload_mb")),
                 ("wall_s", lambda r: r.summary.get("wall_s")))


def group_rows(groups: Sequence[Group], base: Group) -> list[dict[str, Any]]:
    """One row per group (groups.csv): count, and mean and std of each figure over its ok runs."""
    base_mean = base.stat(lambda r: r.steps_per_s)[0]
    out = []
    for g in groups:
        row: dict[str, Any] = {"label": g.label, "runs": len(g.runs), "ok": len(g.ok),
                               "seeds": " ".join(str(r.config.get("seed")) for r in g.runs)}
        for name, value in GROUP_FIGURES:
            mean, std, _ = g.stat(value)
            row[f"{name}_mean"], row[f"{name}_std"] = mean, std
        row["vs_baseline"] = round(row["env_steps_per_s_mean"] / base_mean, 3) \
            if base_mean and row["env_steps_per_s_mean"] is not None else None
        row["outliers"] = " ".join(str(r.path) for r in g.outliers())
        out.append(row)
    return out


def write_csv(table: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)


def pm(mean: Any, std: Any) -> str:
    return "" if mean is None else f"{fmt(float(mean))} ± {fmt(float(std or 0.0))}"


def markdown(table: list[dict[str, Any]], root: Path, base: Run, images: Sequence[Path], note: str,
             groups: Sequence[dict[str, Any]] = (), threshold: float | None = None) -> str:
    lines = [f"# gmiexp report: {root}", "",
             f"{len(table)} runs in {len(groups)} groups (runs that differ only in `seed`); "
             f"baseline: `{base.label}`. Figures: mean ± std over a group's ok runs; n = their count. "
             "Returns are run-wide (every GMI's last episodes); time to return: wall seconds to "
             f"{fmt(threshold) if threshold is not None else '(no threshold)'}, over the runs that reached it; "
             "evaluated: the final policy's deterministic episodes (`--eval-episodes`).", ""]
    if groups:
        gcols = ["group", "n", "env steps/s", "vs baseline", "reward (mean return)", "time to return (s)",
                 "evaluated return", "peak RSS (MB)", "workload memory (MB)", "wall (s)", "outliers"]
        lines += ["| " + " | ".join(gcols) + " |", "|" + "---|" * len(gcols)]
        for g in groups:
            lines.append("| " + " | ".join([
                g["label"], f"{g['ok']}/{g['runs']}", pm(g["env_steps_per_s_mean"], g["env_steps_per_s_std"]),
                fmt(g["vs_baseline"]), pm(g["reward_mean_mean"], g["reward_mean_std"]),
                pm(g["time_to_return_s_mean"], g["time_to_return_s_std"]),
                pm(g["eval_return_mean"], g["eval_return_std"]),
                pm(g["peak_rss_mb_mean"], g["peak_rss_mb_std"]), pm(g["workload_mb_mean"], g["workload_mb_std"]),
                pm(g["wall_s_mean"], g["wall_s_std"]), g["outliers"]]) + " |")
        lines += ["", "## Runs", ""]
    cols = ["label", "status", "env_steps_per_s", "vs_baseline", "reward_mean", "time_to_return_s", "eval_return",
            "peak_rss_mb", "workload_mb", "wall_s", "outlier"]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(row[c]) for c in cols) + " |" for row in table]
    lines += ["", *[f"![{p.stem}]({p.name})" for p in images], "", f"W&B: {note}", ""]
    return "\n".join(lines)


def fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.3f}"
    return "" if v is None else str(v)


def netrc_has_wandb_key() -> bool:
    """``wandb login`` stores the key in ~/.netrc under api.wandb.ai (read without touching the network)."""
    try:
        auth = netrc.netrc().authenticators(os.environ.get("WANDB_BASE_URL", "api.wandb.ai").split("//")[-1])
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(auth and auth[2])


def wandb_online() -> tuple[bool, str]:
    """Online means WANDB_MODE is not offline/disabled and an API key is configured."""
    mode = os.environ.get("WANDB_MODE", "online")
    if mode in ("offline", "disabled", "dryrun"):
        return False, f"WANDB_MODE={mode}: no W&B report created (local report only)"
    if not (os.environ.get("WANDB_API_KEY") or netrc_has_wandb_key()):
        return False, "no W&B API key configured: local report only"
    return True, "online"


SIDE_BY_SIDE = ("perf/env_steps_per_s", "reward/mean", "time/sim_s", "time/inference_s", "time/train_s",
                "time/comm_s", "mem/peak_rss_mb", "mem/workload_mb", "cpu/util")


def summary_metrics(runs: Sequence[Run]) -> list[str]:
    """summary.json metrics to compare: the common ones first, then any async/ and gpu/ the runs have."""
    have = {k for r in runs for k, v in r.metrics.items() if v is not None}
    extra = sorted(k for k in have if k.startswith(("async/", "gpu/")))
    return [k for k in SIDE_BY_SIDE if k in have] + extra


def wandb_report(runs: Sequence[Run], project: str, entity: str | None, title: str, group: str | None = None) -> str:
    """Create a W&B report of the runs (their W&B ``group``, else their experiments); return its URL or why not.

    One bar chart per summary metric (the runs side by side), a run comparer of config and summary, and the
    reward curve against wall time from the logged history.
    """
    online, why = wandb_online()
    if not online:
        return why
    try:
        import wandb_workspaces.reports.v2 as wr
    except ImportError:
        return "wandb-workspaces is not installed (pip install wandb-workspaces): local report only"
    if group:
        runsets = [wr.Runset(entity=entity or "", project=project, name=group, filters=f"Group = '{group}'")]
    else:
        runsets = [wr.Runset(entity=entity or "", project=project, name=g, filters=f"Config('experiment') = '{g}'")
                   for g in sorted({str(r.config.get("experiment")) for r in runs})]
    panels = [wr.BarPlot(title=m, metrics=[m]) for m in summary_metrics(runs)]
    panels += [wr.RunComparer(diff_only="split"), wr.LinePlot(title="reward", x="wall_s", y=["reward/mean"])]
    report = wr.Report(project=project, entity=entity or "", title=title,
                       blocks=[wr.PanelGrid(runsets=runsets, panels=panels)])
    report.save()
    return f"W&B report created: {report.url}"


def build(root: Path, out: Path, selector: dict[str, str], project: str = "gmiexp",
          entity: str | None = None, use_wandb: bool = True, wandb_group: str | None = None,
          eval_episodes: int = 0, threshold: float | None = None) -> Path:
    """Write report.md, runs.csv and the PNGs for the runs under ``root`` (or of ``wandb_group``)."""
    runs = load_wandb_runs(wandb_group, project, entity) if wandb_group else load_runs(root)
    if not runs:
        raise SystemExit(f"report: no runs in W&B group {wandb_group}" if wandb_group
                         else f"report: no summary.json below {root}")
    out.mkdir(parents=True, exist_ok=True)
    base = pick_baseline(runs, selector)
    groups = group_runs(runs)
    base_group = next(g for g in groups if base in g.runs)
    if eval_episodes:
        evaluate_runs(runs, eval_episodes)
    threshold = return_threshold(groups, threshold)
    time_runs(runs, threshold)
    images = [plot_throughput(groups, base_group, out), plot_rewards(groups, out), plot_memory(groups, out)]
    images += [p for p in [plot_reshapes(runs, out)] if p is not None]
    table = rows(runs, base, groups)
    gtable = group_rows(groups, base_group)
    write_csv(table, out / "runs.csv")
    write_csv(gtable, out / "groups.csv")
    note = "skipped (--no-wandb)"
    if use_wandb:
        note = wandb_report(runs, project, entity, f"gmiexp: {wandb_group or root.name}", wandb_group)
    path = out / "report.md"
    text = [markdown(table, root, base, images, note, gtable, threshold), pack_table.markdown(root),
            pbt_views.markdown(root, out)]
    path.write_text("\n".join(filter(None, text)))
    print(f"report: {len(runs)} runs in {len(groups)} groups -> {path}\nW&B: {note}")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gmiexp.tools.report", description=__doc__.splitlines()[0])
    p.add_argument("root", type=Path, nargs="?", help="a run or multirun directory (searched for summary.json)")
    p.add_argument("--wandb-group", help="compare the W&B runs of this group (an experiment) instead of a directory")
    p.add_argument("--out", type=Path, help="output directory (default: <root>/report, or ./report-<group>)")
    p.add_argument("--baseline", action="append", default=[], metavar="KEY=VALUE",
                   help="config values selecting the baseline run (repeatable); default: fewest GMIs")
    p.add_argument("--project", default="gmiexp", help="W&B project the runs were logged to")
    p.add_argument("--entity", default=None, help="W&B entity")
    p.add_argument("--no-wandb", action="store_true", help="never contact W&B")
    p.add_argument("--eval-episodes", type=int, default=0, metavar="N",
                   help="evaluate each run's final policy over N deterministic episodes (mode=eval) first")
    p.add_argument("--return-threshold", type=float, default=None, metavar="R",
                   help="report each run's wall seconds to return R (default: the lowest group's mean final return)")
    a = p.parse_args(argv)
    if (a.root is None) == (a.wandb_group is None):
        p.error("give a run directory or --wandb-group, not both")
    root = a.root or Path(f"wandb-group-{a.wandb_group}")
    out = a.out or (a.root / "report" if a.root else Path(f"report-{a.wandb_group}"))
    if a.eval_episodes and a.wandb_group:
        p.error("--eval-episodes needs the runs' directories (a run directory, not --wandb-group)")
    build(root, out, parse_selector(a.baseline), a.project, a.entity, not a.no_wandb, a.wandb_group,
          a.eval_episodes, a.return_threshold)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
