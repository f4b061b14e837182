"""W&B for every run, from the launcher: the lead GMI's per-epoch history, summary.json's metrics, the Plan.

The launcher already holds what a run produced (every GMI's ``history.jsonl``
and the aggregated ``summary.json``), so one W&B run per gmiexp run is written
there, the same way for every layout and role, and the GMIs need no W&B at all.
Names are summary.json's own, so W&B compares runs on exactly what the local
report shows. Offline unless ``logger.mode=online``; nothing here touches the
network in offline mode.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from gmiexp.launch.status import read_history
from gmiexp.plan import Plan

RUN_FIELDS = ("status", "wall_s", "plan_id", "lead_gmi")  # summary.json's top-level values logged to the summary


def enabled(plan: Plan) -> bool:
    return plan.logger.name == "wandb" and plan.logger.mode != "disabled"


def run_tags(plan: Plan) -> list[str]:
    """Filterable tags: layout, backend and reduction, then the user's ``logger.tags``."""
    return [f"layout:{plan.layout}", f"backend:{plan.backend}", f"reduction:{plan.reduction}",
            *plan.logger.tags]


def run_name(run_dir: Path) -> str:
    """``<run dir>``, or ``<sweep dir>/<job>`` for a multirun member (whose own directory is a number)."""
    return f"{run_dir.parent.name}/{run_dir.name}" if run_dir.name.isdigit() else run_dir.name


def run_config(plan: Plan, summary: dict[str, Any]) -> dict[str, Any]:
    """summary.json's ``config`` keys at the top (what reports compare on), the whole Plan under ``plan``."""
    return {**summary.get("config", {}), "plan_id": plan.plan_id, "plan": plan.to_dict()}


def loggable(row: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in row.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def publish(plan: Plan, run_dir: Path, summary: dict[str, Any]) -> Path | None:
    """Write the W&B run of a finished or failed gmiexp run; return its local directory (None when off)."""
    if not enabled(plan):
        return None
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")  # wandb's banner would otherwise reach stdout
    lg = plan.logger
    run = wandb.init(
        project=lg.project, entity=lg.entity, mode=lg.mode,
        group=lg.group or plan.experiment, job_type="train", name=run_name(run_dir), tags=run_tags(plan),
        dir=str(run_dir), config=run_config(plan, summary), reinit="finish_previous",
        settings=wandb.Settings(console="off", silent=True, x_disable_stats=True),
    )
    try:
        lead = int(summary.get("lead_gmi", 0))
        for row in read_history(run_dir, lead):
            run.log(loggable(row))
        run.summary.update({k: v for k, v in summary.get("metrics", {}).items() if v is not None})
        run.summary.update({k: summary[k] for k in RUN_FIELDS if k in summary})
        if (run_dir / "plan.yaml").exists():
            run.save(str(run_dir / "plan.yaml"), base_path=str(run_dir), policy="now")
        local = Path(run.dir).parent
    finally:
        run.finish(exit_code=0 if summary.get("status") == "ok" else 1)
    return local
