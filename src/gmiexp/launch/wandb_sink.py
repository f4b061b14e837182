"""W&B for every run, from the launcher: the run's per-epoch rows as it trains, summary.json's metrics, the Plan.

The launcher tails every GMI's ``history.jsonl`` while the run trains (:mod:`gmiexp.launch.live`), so one W&B
run per gmiexp run is written there, live, the same way for every layout and role, and the GMIs need no W&B.
Names are summary.json's own, so W&B compares runs on exactly what the local
report shows. Offline unless ``logger.mode=online``; nothing here touches the
network in offline mode.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gmiexp.launch.summary import run_config
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


class WandbSink:
    """One W&B run per gmiexp run, opened when the launch starts.

    Run rows are logged as they come (frames as the step metric, ``define_metric``); summary.json's metrics and
    status go to its summary at the end.
    """

    def __init__(self, plan: Plan, run_dir: Path) -> None:
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")  # wandb's banner would otherwise reach stdout
        lg = plan.logger
        self.plan, self.run_dir = plan, run_dir
        # summary.json's config at the top (what reports compare on), the whole Plan under "plan"
        config = {**run_config(plan), "plan_id": plan.plan_id, "plan": plan.to_dict()}
        self.run = wandb.init(
            project=lg.project, entity=lg.entity, mode=lg.mode,
            group=lg.group or plan.experiment, job_type="train", name=run_name(run_dir), tags=run_tags(plan),
            dir=str(run_dir), config=config, reinit="finish_previous",
            settings=wandb.Settings(console="off", silent=True, x_disable_stats=True),
        )
        self.run.define_metric("frames")
        self.run.define_metric("*", step_metric="frames")
        if (run_dir / "plan.yaml").exists():
            self.run.save(str(run_dir / "plan.yaml"), base_path=str(run_dir), policy="now")

    def log(self, row: dict[str, float]) -> None:
        self.run.log(row)

    def close(self, summary: dict[str, Any] | None) -> None:
        summary = summary or {}
        try:
            self.run.summary.update({k: v for k, v in summary.get("metrics", {}).items() if v is not None})
            self.run.summary.update({k: summary[k] for k in RUN_FIELDS if k in summary})
            if summary.get("reshapes"):  # launch.reshape: each re-shape (epoch, from, to, why, rates, cost)
                self.run.summary["reshapes"] = summary["reshapes"]
            if (self.run_dir / "plan.yaml").exists():
                self.run.save(str(self.run_dir / "plan.yaml"), base_path=str(self.run_dir), policy="now")
        finally:
            self.run.finish(exit_code=0 if summary.get("status") == "ok" else 1)
