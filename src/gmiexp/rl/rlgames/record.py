"""The policy record: what a checkpoint is a policy of, written beside it when training starts.

rl-games' checkpoints hold weights, not the task or the network that give them meaning. GMI 0
writes ``gmiexp_policy.yaml`` into the directory its checkpoints go to (rl-games' ``nn/``): the
Plan's task and the rl-games params it trained with, so ``mode=eval checkpoint=<.pth>`` rebuilds
the same policy on the same task without the config being typed again.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from gmiexp.config import TaskConfig
from gmiexp.errors import ConfigError

RECORD = "gmiexp_policy.yaml"
FORMAT = 1


def checkpoint_dir(params: dict[str, Any]) -> Path:
    """Where rl-games writes this run's checkpoints: ``<train_dir>/<experiment name>/nn``."""
    cfg = params["config"]
    return Path(cfg["train_dir"]) / cfg["full_experiment_name"] / "nn"


def write_record(params: dict[str, Any], task: TaskConfig, plan_id: str = "") -> Path:
    """Record the task and rl-games params beside the checkpoints this run will write."""
    nn_dir = checkpoint_dir(params)
    nn_dir.mkdir(parents=True, exist_ok=True)
    doc = {"format": FORMAT, "plan_id": plan_id, "task": dataclasses.asdict(task), "params": params}
    path = nn_dir / RECORD
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def read_record(checkpoint: Path) -> dict[str, Any]:
    """The record beside ``checkpoint``; exit 2 when there is none or it is not one."""
    path = checkpoint.parent / RECORD
    if not path.is_file():
        raise ConfigError(f"invalid checkpoint={checkpoint}: no {RECORD} beside it; gmiexp writes one next to "
                          "the checkpoints of every training run (rl_games/run/nn/), naming the task and network. "
                          "For a checkpoint from elsewhere give its config: task=... or train=rlgames train.file=...")
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not {"task", "params"} <= set(doc):
        raise ConfigError(f"invalid {path}: not a gmiexp policy record (format {FORMAT}, keys task and params)")
    return doc
