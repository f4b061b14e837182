"""Between a simulator's numpy spaces and what rl-games' agents take: the conversions every adapter shares.

* Observations: a Dict of Boxes is flattened to one float32 vector in the order the simulator returns its keys
  (envpool: its space's order; exactly what rl-games' envpool vec-env does with ``flatten_obs: True``); uint8
  frames stay uint8 (rl-games' ``_preproc_obs`` divides them by 255 on the model's device, and its rollout
  buffer stores them as bytes); anything else is float32.
* Actions: a MultiDiscrete space is shown to rl-games as a Tuple of Discretes (its ``multi_discrete`` head reads
  only Tuples); discrete actions go to the simulator as integers, continuous ones as float64.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch


def _f32_box(space: gym.spaces.Box) -> gym.spaces.Box:
    with np.errstate(over="ignore"):  # float64 bounds beyond float32 (envpool's dm_control) become +-inf
        return gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), dtype=np.float32)


def policy_observation_space(space: gym.Space) -> gym.Space:
    """The observation space rl-games sees."""
    if isinstance(space, gym.spaces.Dict):
        return _f32_box(gym.spaces.flatten_space(space))
    if isinstance(space, gym.spaces.Box) and space.dtype == np.uint8:
        return space
    if isinstance(space, gym.spaces.Box):
        return _f32_box(space)
    raise ValueError(f"observation space {space} is not a Box or a Dict of Boxes")


def policy_action_space(space: gym.Space) -> gym.Space:
    """The action space rl-games sees."""
    if isinstance(space, gym.spaces.MultiDiscrete):
        return gym.spaces.Tuple([gym.spaces.Discrete(int(n)) for n in space.nvec])
    if isinstance(space, gym.spaces.Box):
        return _f32_box(space)
    return space


def obs_to_torch(obs: Any, device: torch.device) -> torch.Tensor:
    """A batch of observations (an array, or a dict of arrays flattened in its order) as a tensor on ``device``."""
    if isinstance(obs, dict):
        n = len(next(iter(obs.values())))
        obs = np.concatenate([np.asarray(v).reshape(n, -1) for v in obs.values()], axis=1)
    arr = np.asarray(obs)
    if arr.dtype != np.uint8:
        arr = arr.astype(np.float32, copy=False)
    return torch.from_numpy(np.ascontiguousarray(arr)).to(device)


def actions_to_numpy(actions: torch.Tensor, space: gym.Space) -> np.ndarray:
    """rl-games' actions as the simulator steps them."""
    act = actions.detach().cpu().numpy()
    if isinstance(space, gym.spaces.Box):
        return act.astype(np.float64, copy=False)
    return act.astype(np.int64, copy=False)
