"""Which task ``mode=eval`` plays: the one the checkpoint's record names, checked against the command line's."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gmiexp.config import Config
from gmiexp.errors import ConfigError

#: what makes two tasks the same for an rl-games policy: the simulator and its id
TASK_IDENTITY = ("simulator", "env_id")


def requested_task(cfg: Config) -> dict[str, Any] | None:
    """The task the command line asked for explicitly (``task=...``, ``task.*=``, ``train=rlgames``), if any."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    asked = [o.lstrip("+~").split("=")[0] for o in HydraConfig.get().overrides.task]
    if any(k == "task" or k.startswith("task.") or k in ("train", "train.file") for k in asked):
        return dataclasses.asdict(cfg.task)
    return None


def check_task_matches(recorded: dict[str, Any], asked: dict[str, Any] | None, checkpoint: Path,
                       identity: Sequence[str] = TASK_IDENTITY) -> None:
    """Exit 2 when the command line names another task than the checkpoint's record (by ``identity``)."""
    if asked is None:
        return
    have = {k: recorded.get(k) for k in identity}
    want = {k: asked.get(k) for k in identity}
    if have != want:
        def name(d: dict[str, Any]) -> str:
            return " ".join(str(v) for v in d.values() if v)

        raise ConfigError(
            f"invalid checkpoint={checkpoint} for task {asked.get('name')} ({name(want)}): "
            f"it was trained on task {recorded.get('name')} ({name(have)}); "
            "drop the task override to evaluate it on its own task")
