"""Does a checkpoint's policy fit this run's task and network? Asked before anything starts.

rl-games finds out only inside a GMI, when ``load_state_dict`` fails with a page of ``size mismatch for
a2c_network...`` lines and the run exits 1. The sizes are in the file: the observation normaliser (or the first
layer) holds the observation size, the action head the action count, the MLP's layers the hidden units. So
``checkpoint=`` (every training layout) and ``mode=eval`` read them first and exit 2 in one line naming the
checkpoint's sizes (and task, where its record names one) and the run's. Light: torch and the task tables only,
no rl-games, so the launcher checks before the GMIs' server imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from gmiexp.config import TaskConfig
from gmiexp.envs import task_dims
from gmiexp.errors import ConfigError
from gmiexp.rl.rlgames.record import RECORD

NET = "a2c_network."
HEADS = re.compile(rf"{re.escape(NET)}(mu|logits)(\.\d+)?\.weight$")  # continuous mean; discrete (per branch) logits
MLP = re.compile(rf"{re.escape(NET)}actor_mlp\.(\d+)\.weight$")


@dataclass(frozen=True)
class PolicySizes:
    """What a policy's weights fix: observation size, policy head outputs, MLP hidden units (None: not known)."""

    obs: int | None
    actions: int | None
    mlp: tuple[int, ...] | None

    def describe(self) -> str:
        obs = "?" if self.obs is None else self.obs
        acts = "?" if self.actions is None else self.actions
        return f"{obs} observations, {acts} actions" + ("" if self.mlp is None else f", mlp {list(self.mlp)}")


def checkpoint_sizes(model: dict[str, Any]) -> PolicySizes:
    """The sizes an rl-games ``model`` state holds (``_orig_mod.`` prefixes of ``torch.compile`` dropped)."""
    shapes = {k.removeprefix("_orig_mod."): tuple(v.shape) for k, v in model.items() if hasattr(v, "shape")}
    plain = not any(k.startswith((f"{NET}actor_cnn", f"{NET}rnn")) for k in shapes)  # the MLP sees the observation
    layers = sorted((int(m.group(1)), shapes[k]) for k in shapes if (m := MLP.match(k)) and len(shapes[k]) == 2)
    obs = None
    if "running_mean_std.running_mean" in shapes:
        obs = int(torch.Size(shapes["running_mean_std.running_mean"]).numel())
    elif plain and layers:
        obs = layers[0][1][1]
    heads = [s[0] for k, s in shapes.items() if HEADS.match(k)]
    return PolicySizes(obs=obs, actions=sum(heads) if heads else None,
                       mlp=tuple(s[0] for _, s in layers) if plain and layers else None)


def task_sizes(task: TaskConfig) -> PolicySizes:
    """The sizes the run's policy will have: the task's spaces (no simulator built) and ``task.mlp_units``."""
    obs, actions = task_dims(task)
    plain = not task.cnn and not task.rnn
    return PolicySizes(obs=obs, actions=actions, mlp=tuple(int(u) for u in task.mlp_units) if plain else None)


def differs(have: PolicySizes, want: PolicySizes) -> bool:
    """A size both sides know and that is not the same."""
    pairs = ((have.obs, want.obs), (have.actions, want.actions), (have.mlp, want.mlp))
    return any(a is not None and b is not None and a != b for a, b in pairs)


def recorded_task(checkpoint: Path) -> str | None:
    """The task the record beside the checkpoint names (gmiexp writes one with every run), if there is one."""
    try:
        doc = yaml.safe_load((checkpoint.parent / RECORD).read_text())
        return str(doc["task"]["name"])
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return None


def read_model(checkpoint: Path) -> dict[str, Any]:
    """The ``model`` state of an rl-games checkpoint; exit 2 for a file that is not one."""
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - any unreadable file is the user's bad input
        raise ConfigError(f"invalid checkpoint={checkpoint}: not a readable rl-games checkpoint ({e})") from e
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise ConfigError(f"invalid checkpoint={checkpoint}: not an rl-games checkpoint (no 'model' state)")
    return state["model"]


def check_checkpoint_fits(checkpoint: Path, task: TaskConfig) -> None:
    """Exit 2, in one line, when the checkpoint's policy does not have the sizes this run's policy will have."""
    have, want = checkpoint_sizes(read_model(checkpoint)), task_sizes(task)
    if not differs(have, want):
        return
    trained = recorded_task(checkpoint)
    own = f"task {trained}, " if trained else ""
    hint = f" (task={trained})" if trained and trained != task.name else ""
    raise ConfigError(
        f"invalid checkpoint={checkpoint}: its policy has {own}{have.describe()}; this run's has task {task.name}, "
        f"{want.describe()}; valid: a checkpoint of task {task.name} with that network, or the checkpoint's own "
        f"task{hint}")
