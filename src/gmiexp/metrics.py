"""Metric sinks with the same names in every run, so W&B compares runs: none or wandb (offline default)."""

from __future__ import annotations

import os
from typing import Any


class MetricsLogger:
    """No-op sink; base class of the real ones."""

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        pass

    def summary(self, metrics: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


class WandbLogger(MetricsLogger):
    """One W&B run per gmiexp run, grouped by experiment, config logged; offline unless asked otherwise."""

    def __init__(self, cfg: dict[str, Any], run_dir: str, name: str, config: dict[str, Any]) -> None:
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        mode = cfg.get("mode", "offline")
        self.run = wandb.init(
            project=cfg.get("project", "gmiexp"), entity=cfg.get("entity"), mode=mode,
            group=cfg.get("group") or config.get("experiment", "default"), name=name,
            tags=list(cfg.get("tags") or []), dir=run_dir, config=config, reinit="finish_previous",
        )

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        self.run.log(metrics, step=step)

    def summary(self, metrics: dict[str, Any]) -> None:
        for k, v in metrics.items():
            self.run.summary[k] = v

    def close(self) -> None:
        self.run.finish()


def make_logger(cfg: dict[str, Any], run_dir: str, name: str, config: dict[str, Any]) -> MetricsLogger:
    """The sink named by ``logger.name``."""
    if cfg.get("name", "none") == "wandb":
        return WandbLogger(cfg, run_dir, name, config)
    return MetricsLogger()
