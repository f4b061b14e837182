"""Comparison report of runs: ``python -m gmiexp.tools.report <multirun dir> [--out DIR] [--baseline K=V]``.

Reads every ``summary.json`` below the directory, or with ``--wandb-group G``
every W&B run of that group (the launcher logs summary.json's metrics under
the same names, :mod:`gmiexp.metrics`), and writes ``report.md`` with PNG plots
(throughput normalised to a baseline run, reward against wall time, peak
memory) and ``runs.csv``. With W&B online it also creates a W&B report of the
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
from gmiexp.tools.memory import on_device, peak_memory_mb  # noqa: E402

CONFIG_KEYS = ("task", "layout", "backend", "reduction", "num_gpus", "gmis_per_gpu", "num_envs",
               "max_iterations", "seed", "experiment")
STEPS = "perf/env_steps_per_s"


@dataclass
class Run:
    """One finished run: where it is, its summary, and a label built from what differs between runs."""

    path: Path
    summary: dict[str, Any]
    label: str = ""

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


def job_order(path: Path) -> tuple:
    """Multirun job numbers sort numerically (2 before 10)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in path.parts)


def load_runs(root: Path) -> list[Run]:
    runs = []
    for path in sorted(root.rglob("summary.json"), key=job_order):
        try:
            runs.append(Run(path.parent, json.loads(path.read_text())))
        except (OSError, ValueError) as e:
            print(f"report: skipping {path}: {e}", file=sys.stderr)
    label_runs(runs)
    return runs


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


def plot_throughput(runs: Sequence[Run], base: Run, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(runs) + 2), 4))
    norm = [r.steps_per_s / base.steps_per_s if base.steps_per_s else 0.0 for r in runs]
    bars = ax.bar(range(len(runs)), norm, color=["tab:gray" if r is base else "tab:blue" for r in runs])
    ax.bar_label(bars, labels=[f"{v:.2f}x" for v in norm], fontsize=8)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xticks(range(len(runs)), [r.label for r in runs], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"env steps/s / baseline ({base.steps_per_s:,.0f})")
    ax.set_title("Throughput normalised to the baseline (grey)")
    return save(fig, out / "throughput.png")


def plot_rewards(runs: Sequence[Run], out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in runs:
        pts = [(h["wall_s"], h["reward/mean"]) for h in r.summary.get("history", [])
               if h.get("reward/mean") is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), label=r.label, lw=1.2)
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("mean episode reward")
    ax.set_title("Reward against wall time")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    return save(fig, out / "reward.png")


def plot_memory(runs: Sequence[Run], out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(runs) + 2), 4))
    ax.bar(range(len(runs)), [r.peak_mem_mb for r in runs], color="tab:orange")
    ax.set_xticks(range(len(runs)), [r.label for r in runs], rotation=30, ha="right", fontsize=8)
    gpu = any(on_device(r.metrics) for r in runs)
    ax.set_ylabel("peak GPU memory per GMI (MB)" if gpu else "process memory per GMI (MB)")
    ax.set_title("Peak memory")
    return save(fig, out / "memory.png")


def save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def rows(runs: Sequence[Run], base: Run) -> list[dict[str, Any]]:
    return [{"label": r.label, "status": r.summary.get("status"), "env_steps_per_s": round(r.steps_per_s, 1),
             "vs_baseline": round(r.steps_per_s / base.steps_per_s, 3) if base.steps_per_s else None,
             "reward_mean": r.metrics.get("reward/mean"), "peak_mem_mb": round(r.peak_mem_mb, 1),
             "wall_s": round(float(r.summary.get("wall_s", 0.0)), 2), "run_dir": str(r.path)} for r in runs]


def write_csv(table: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)


def markdown(table: list[dict[str, Any]], root: Path, base: Run, images: Sequence[Path], note: str) -> str:
    cols = ["label", "status", "env_steps_per_s", "vs_baseline", "reward_mean", "peak_mem_mb", "wall_s"]
    lines = [f"# gmiexp report: {root}", "", f"{len(table)} runs; baseline: `{base.label}`.", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
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
          entity: str | None = None, use_wandb: bool = True, wandb_group: str | None = None) -> Path:
    """Write report.md, runs.csv and the PNGs for the runs under ``root`` (or of ``wandb_group``)."""
    runs = load_wandb_runs(wandb_group, project, entity) if wandb_group else load_runs(root)
    if not runs:
        raise SystemExit(f"report: no runs in W&B group {wandb_group}" if wandb_group
                         else f"report: no summary.json below {root}")
    out.mkdir(parents=True, exist_ok=True)
    base = pick_baseline(runs, selector)
    images = [plot_throughput(runs, base, out), plot_rewards(runs, out), plot_memory(runs, out)]
    table = rows(runs, base)
    write_csv(table, out / "runs.csv")
    note = "skipped (--no-wandb)"
    if use_wandb:
        note = wandb_report(runs, project, entity, f"gmiexp: {wandb_group or root.name}", wandb_group)
    path = out / "report.md"
    path.write_text("\n".join(filter(None, [markdown(table, root, base, images, note), pack_table.markdown(root)])))
    print(f"report: {len(runs)} runs -> {path}\nW&B: {note}")
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
    a = p.parse_args(argv)
    if (a.root is None) == (a.wandb_group is None):
        p.error("give a run directory or --wandb-group, not both")
    root = a.root or Path(f"wandb-group-{a.wandb_group}")
    out = a.out or (a.root / "report" if a.root else Path(f"report-{a.wandb_group}"))
    build(root, out, parse_selector(a.baseline), a.project, a.entity, not a.no_wandb, a.wandb_group)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
