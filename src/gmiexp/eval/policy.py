"""Rebuild a trained policy as rl-games' own player, and check the checkpoint fits it first.

rl-games' players (``PpoPlayerContinuous``/``PpoPlayerDiscrete``) hold the observation normaliser
inside the model and map actions to the action space the way training did, so evaluation acts
exactly as the trained agent; gmiexp hands them its simulator through ``env_info``/``vec_env``.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from pathlib import Path
from typing import Any

import torch

from gmiexp.errors import ConfigError

PLAYERS = {"a2c_continuous": "PpoPlayerContinuous", "a2c_discrete": "PpoPlayerDiscrete"}


def load_checkpoint(path: Path) -> dict[str, Any]:
    """An rl-games checkpoint (a dict with the ``model`` state); exit 2 for anything else."""
    from rl_games.algos_torch import torch_ext

    try:
        with contextlib.redirect_stdout(sys.stderr):  # rl-games announces the load on stdout
            state = torch_ext.load_checkpoint(str(path))
    except Exception as e:  # noqa: BLE001 - any unreadable file is the user's bad input
        raise ConfigError(f"invalid checkpoint={path}: not a readable rl-games checkpoint ({e})") from e
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise ConfigError(f"invalid checkpoint={path}: not an rl-games checkpoint (no 'model' state)")
    return state


def make_player(params: dict[str, Any], env: Any, device: str, deterministic: bool) -> Any:
    """rl-games' player for these params, stepping ``env``."""
    from rl_games.algos_torch import players

    algo = params["algo"]["name"]
    if algo not in PLAYERS:
        raise ConfigError(f"invalid recorded algo {algo!r}: mode=eval plays {', '.join(PLAYERS)}")
    p = copy.deepcopy(params)
    cfg = p["config"]
    cfg.update({"env_info": env.get_env_info(), "vec_env": env, "device_name": device,
                "player": {"deterministic": deterministic, "print_stats": False}})
    with contextlib.redirect_stdout(sys.stderr):
        player = getattr(players, PLAYERS[algo])(p)
    player.has_batch_dimension = True  # one row per environment
    return player


def check_fits(state: dict[str, Any], model: torch.nn.Module, checkpoint: Path, task_name: str) -> None:
    """Exit 2 naming the tensors that differ when the checkpoint is not a policy of this network."""
    want = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    have = {k.removeprefix("_orig_mod."): tuple(v.shape) for k, v in state["model"].items()}
    diffs = [f"{k}: checkpoint {have.get(k, 'absent')}, {task_name} needs {want.get(k, 'absent')}"
             for k in sorted(set(want) | set(have)) if want.get(k) != have.get(k)]
    if diffs:
        shown = "; ".join(diffs[:3]) + (f"; and {len(diffs) - 3} more" if len(diffs) > 3 else "")
        raise ConfigError(f"invalid checkpoint={checkpoint}: its weights do not fit the policy of task "
                          f"{task_name} ({shown})")


def restore(player: Any, state: dict[str, Any]) -> None:
    """Load the checked weights (the normaliser lives inside the model)."""
    model = {k.removeprefix("_orig_mod."): v for k, v in state["model"].items()}
    player.model.load_state_dict(model)
    player.model.eval()


def start_episodes(player: Any, num_envs: int) -> None:
    """A recurrent policy starts each of ``num_envs`` environments from rl-games' zero state (no-op otherwise)."""
    if player.is_rnn:
        player.batch_size = num_envs  # rl-games' player sizes its states by batch_size
        player.init_rnn()
