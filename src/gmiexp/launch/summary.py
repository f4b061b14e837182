"""Aggregate per-GMI results into ``summary.json`` (DESIGN.md metric names) and the one-line summary."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from gmiexp.launch.progress import first_return, return_text
from gmiexp.plan import Plan
from gmiexp.stats import steady_rate
from gmiexp.status import read_history, read_result

TIME_KEYS = ("time/sim_s", "time/inference_s", "time/train_s", "time/comm_s")
ASYNC_KEYS = ("async/predictions_per_s", "async/train_samples_per_s")


def async_metrics(histories: dict[int, list[dict[str, Any]]]) -> dict[str, float]:
    """PPS and TTOP: steady rates of the ``predictions`` / ``train_samples`` history keys, summed over GMIs.

    Only runs whose roles write those keys (serving and experience-sharing layouts) get them.
    """
    out: dict[str, float] = {}
    for key, metric in zip(("predictions", "train_samples"), ASYNC_KEYS, strict=True):
        rates = [steady_rate(rows, key, cumulative=False) for rows in histories.values()
                 if rows and all(key in r for r in rows) and any(r[key] for r in rows)]
        if rates:
            out[metric] = sum(rates)
    return out


def lead_gmi(histories: dict[int, list[dict[str, Any]]]) -> int:
    """The GMI whose history speaks for the run (summary's ``history``, W&B's curves): the first reporting rewards.

    GMI 0 in the PPO layouts; in serving and experience layouts GMI 0 may be a trainer that sees no episodes.
    """
    for gid in sorted(histories):
        if any(r.get("reward/mean") is not None for r in histories[gid]):
            return gid
    return min(histories, default=0)


#: the last run row's, in the metrics (its ``reward/mean`` is the run-wide window: :mod:`gmiexp.launch.live`)
LAST_ROW_PREFIXES = ("frames", "iteration", "reward/", "episode/", "gmi/", "loss/", "train/")


def run_config(plan: Plan) -> dict[str, Any]:
    """What a run is compared by (summary.json's and W&B's ``config``)."""
    return {
        "task": plan.task.name, "layout": plan.layout, "backend": plan.backend,
        "reduction": plan.reduction, "num_gpus": len(plan.devices),
        "gmis_per_gpu": max(len(ids) for ids in plan.gpu_map()), "gmis": plan.world_size,
        "num_envs": plan.gmis[0].num_envs, "max_iterations": plan.max_iterations, "seed": plan.seed,
        "experiment": plan.experiment, "role": plan.role, "nnodes": plan.nnodes,
        **({"channel": str(plan.channel.name)} if plan.channel is not None else {}),
    }


def resumed(plan: Plan) -> dict[str, Any] | None:
    """Where this attempt went on from: its run dir's own checkpoint (requeue) or the user's ``checkpoint=``."""
    if plan.resumed:
        return dict(plan.resumed)
    return {"checkpoint": str(plan.checkpoint)} if plan.checkpoint else None


def build_summary(plan: Plan, run_dir: Path, wall_s: float, host_metrics: dict[str, float],
                  rows: list[dict[str, Any]], status: str = "ok") -> dict[str, Any]:
    """A node's summary (the run's, for one node) from its GMIs' status files; written to ``summary.json``.

    ``rows``: the run rows (:class:`gmiexp.launch.live.RunRows`), as sent live or composed from the histories.
    """
    metrics: dict[str, Any] = {}
    results = {g.id: read_result(run_dir, g.id) or {} for g in plan.local_gmis}
    histories = {g.id: read_history(run_dir, g.id) for g in plan.local_gmis}
    lead = lead_gmi(histories)
    per_gmi = {}
    for gid, hist in histories.items():
        per_gmi[gid] = steady_rate(hist, "local_frames", cumulative=False)
        metrics[f"perf/gmi/{gid}/env_steps_per_s"] = per_gmi[gid]
    metrics["perf/env_steps_per_s"] = sum(per_gmi.values()) if per_gmi else 0.0
    metrics.update(async_metrics(histories))
    for k in TIME_KEYS:
        vals = [r[k] for r in results.values() if k in r]
        metrics[k] = sum(vals) / len(vals) if vals else 0.0
    rewards = [r.get("reward/mean") for r in histories.get(lead, []) if r.get("reward/mean") is not None]
    metrics["reward/mean"] = rewards[-1] if rewards else None
    rss = [r["mem/peak_rss_mb"] for r in results.values() if "mem/peak_rss_mb" in r]
    metrics["mem/peak_rss_mb"] = max(rss) if rss else None
    workload = [r["mem/workload_mb"] for r in results.values() if "mem/workload_mb" in r]
    metrics["mem/workload_mb"] = max(workload) if workload else None
    metrics.update(host_metrics)
    if rows:
        metrics.update({k: v for k, v in rows[-1].items() if k.startswith(LAST_ROW_PREFIXES)})
    summary = {
        "status": status,
        "plan_id": plan.plan_id,
        "run_dir": str(run_dir),
        "resumed": resumed(plan),
        "wall_s": wall_s,
        "started_at": time.time() - wall_s,  # epoch seconds: when the launch began and ended (packed sweeps
        "finished_at": time.time(),  # compare members' times)
        "config": run_config(plan),
        "metrics": metrics,
        "gmis": {str(k): v for k, v in results.items()},
        "lead_gmi": lead,
        "history": rows,
        **({"node": plan.node_rank} if plan.nnodes > 1 else {}),
    }
    write_summary(run_dir / "summary.json", summary)
    return summary


def merge_nodes(plan: Plan, run_dir: Path, nodes: dict[int, dict[str, Any]], wall_s: float) -> dict[str, Any]:
    """The run's summary from every node's (node 0 writes it to ``<run_dir>/summary.json``).

    Global figures: env steps/s and per-GMI rates over all GMIs, time/* averaged over all GMIs (nodes carry the
    same number), memory peaks the largest; ``nodes`` keeps each node's own metrics (host figures included).
    """
    merged = dict(nodes[0])
    metrics: dict[str, Any] = dict(nodes[0]["metrics"])
    per_gmi = {k: v for s in nodes.values() for k, v in s["metrics"].items() if k.startswith("perf/gmi/")}
    metrics.update(per_gmi)
    metrics["perf/env_steps_per_s"] = sum(s["metrics"]["perf/env_steps_per_s"] for s in nodes.values())
    for k in (*TIME_KEYS, *ASYNC_KEYS):
        vals = [s["metrics"][k] for s in nodes.values() if k in s["metrics"]]
        if vals:
            metrics[k] = sum(vals) / len(vals) if k in TIME_KEYS else sum(vals)
    for k in ("mem/peak_rss_mb", "mem/workload_mb"):
        vals = [s["metrics"][k] for s in nodes.values() if s["metrics"].get(k) is not None]
        metrics[k] = max(vals) if vals else None
    merged.update(
        run_dir=str(run_dir), wall_s=wall_s, metrics=metrics,
        gmis={k: v for s in nodes.values() for k, v in s["gmis"].items()},
        nodes={str(n): {"run_dir": s["run_dir"], "wall_s": s["wall_s"], "metrics": s["metrics"]}
               for n, s in sorted(nodes.items())},
    )
    merged.pop("node", None)
    write_summary(run_dir / "summary.json", merged)
    return merged


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """Write ``summary.json`` whole or not at all (temporary file, then rename): a full disk leaves no empty one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(summary, indent=2, default=str))
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def one_line(summary: dict[str, Any]) -> str:
    """The last line a run prints."""
    c, m = summary["config"], summary["metrics"]
    per = ", ".join(f"gmi{k.split('/')[2]} {v:,.0f}" for k, v in m.items()
                    if k.startswith("perf/gmi/") and k.endswith("env_steps_per_s"))
    reward = m.get("reward/mean")
    rtxt = return_text(first_return(summary.get("history") or []),
                       float(reward) if isinstance(reward, (int, float)) else None)
    nodes = ""  # a node's own line names it; node 0's (the run's) counts the nodes
    if "node" in summary:
        nodes = f"node={summary['node']} of {c['nnodes']} (its GMIs' figures) "
    elif c.get("nnodes", 1) > 1:
        nodes = f"nodes={c['nnodes']} "
    return (f"gmiexp {summary['status']}: {nodes}task={c['task']} layout={c['layout']} backend={c['backend']} "
            f"reduction={c['reduction']} gmis={c['gmis']} num_envs={c['num_envs']} | "
            f"env_steps/s={m['perf/env_steps_per_s']:,.0f} ({per}) | {rtxt} | "
            f"wall={summary['wall_s']:.1f}s | {summary['run_dir']}")
