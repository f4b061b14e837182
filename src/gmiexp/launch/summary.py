"""Aggregate per-GMI results into ``summary.json`` (DESIGN.md metric names) and the one-line summary."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from gmiexp.launch.status import read_history, read_result
from gmiexp.plan import Plan

TIME_KEYS = ("time/sim_s", "time/inference_s", "time/train_s", "time/comm_s")


def steady_rate(rows: list[dict[str, Any]], frames_key: str, cumulative: bool) -> float:
    """Frames per second after the first (warm-up) epoch; all epochs when there are fewer than 3."""
    if not rows:
        return 0.0
    if len(rows) < 3:
        frames = rows[-1][frames_key] if cumulative else sum(r[frames_key] for r in rows)
        return frames / rows[-1]["wall_s"] if rows[-1]["wall_s"] > 0 else 0.0
    first, last = rows[0], rows[-1]
    frames = last[frames_key] - first[frames_key] if cumulative else sum(r[frames_key] for r in rows[1:])
    dt = last["wall_s"] - first["wall_s"]
    return frames / dt if dt > 0 else 0.0


def async_metrics(histories: dict[int, list[dict[str, Any]]]) -> dict[str, float]:
    """PPS and TTOP: steady rates of the ``predictions`` / ``train_samples`` history keys, summed over GMIs.

    Only runs whose roles write those keys (serving and experience-sharing layouts) get them.
    """
    out: dict[str, float] = {}
    for key, metric in (("predictions", "async/predictions_per_s"), ("train_samples", "async/train_samples_per_s")):
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


def build_summary(plan: Plan, run_dir: Path, wall_s: float, host_metrics: dict[str, float]) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    results = {g.id: read_result(run_dir, g.id) or {} for g in plan.gmis}
    histories = {g.id: read_history(run_dir, g.id) for g in plan.gmis}
    lead = lead_gmi(histories)
    per_gmi = {}
    for gid, rows in histories.items():
        per_gmi[gid] = steady_rate(rows, "local_frames", cumulative=False)
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
    summary = {
        "status": "ok",
        "plan_id": plan.plan_id,
        "run_dir": str(run_dir),
        "resumed": plan.resumed or None,  # {checkpoint, epoch} when this attempt went on from its run dir's own
        "wall_s": wall_s,
        "started_at": time.time() - wall_s,  # epoch seconds: when the launch began and ended (packed sweeps
        "finished_at": time.time(),  # compare members' times)
        "config": {
            "task": plan.task.name, "layout": plan.layout, "backend": plan.backend,
            "reduction": plan.reduction, "num_gpus": len(plan.devices),
            "gmis_per_gpu": max(len(ids) for ids in plan.gpu_map()), "gmis": plan.world_size,
            "num_envs": plan.gmis[0].num_envs, "max_iterations": plan.max_iterations, "seed": plan.seed,
            "experiment": plan.experiment, "role": plan.role,
            **({"channel": str(plan.channel.name)} if plan.channel is not None else {}),
        },
        "metrics": metrics,
        "gmis": {str(k): v for k, v in results.items()},
        "lead_gmi": lead,
        "history": histories.get(lead, []),
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


def one_line(summary: dict[str, Any]) -> str:
    """The last line a run prints."""
    c, m = summary["config"], summary["metrics"]
    per = ", ".join(f"gmi{k.split('/')[2]} {v:,.0f}" for k, v in m.items()
                    if k.startswith("perf/gmi/") and k.endswith("env_steps_per_s"))
    reward = m.get("reward/mean")
    rtxt = f"{reward:.2f}" if isinstance(reward, (int, float)) else "n/a"
    return (f"gmiexp {summary['status']}: task={c['task']} layout={c['layout']} backend={c['backend']} "
            f"reduction={c['reduction']} gmis={c['gmis']} num_envs={c['num_envs']} | "
            f"env_steps/s={m['perf/env_steps_per_s']:,.0f} ({per}) | reward={rtxt} | "
            f"wall={summary['wall_s']:.1f}s | {summary['run_dir']}")
