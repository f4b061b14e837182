"""rl-games adapter of the torch-native cart-pole."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from gmiexp.envs.torch_cartpole import TorchCartpole
from gmiexp.envs.vecenv import GMIVecEnv


class CartpoleVecEnv(GMIVecEnv):
    env_state_rows = TorchCartpole.ENV_ROWS  # each environment's state and step counter carry over a re-shape

    def __init__(self, num_envs: int, seed: int, max_episode_length: int = 200, device: str = "cpu") -> None:
        high = np.array([4.8, np.inf, 0.42, np.inf], dtype=np.float32)
        super().__init__(num_envs, gym.spaces.Box(-high, high, dtype=np.float32), gym.spaces.Discrete(2))
        self.sim = TorchCartpole(num_envs, seed=seed, max_episode_length=max_episode_length, device=device)

    def reset(self) -> torch.Tensor:
        return self.sim.reset()

    def get_env_state(self) -> dict[str, torch.Tensor]:
        """rl-games' hook for a checkpoint: the simulator's whole state (a resume steps on where it stopped)."""
        return self.sim.get_state()

    def set_env_state(self, env_state: Any) -> None:
        if env_state is not None:  # rl-games passes None for a checkpoint without one
            self.sim.set_state(env_state)

    def _step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        obs, rew, term, trunc = self.sim.step(actions)
        return obs, rew, term | trunc, {"time_outs": trunc}
