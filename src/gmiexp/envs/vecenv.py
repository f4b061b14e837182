"""Simulator adapters as rl-games vec-envs (``IVecEnv``): torch tensors in, torch tensors out."""

from __future__ import annotations

import time
from abc import ABCMeta, abstractmethod
from typing import Any

import gymnasium as gym
import torch
from rl_games.common.ivecenv import IVecEnv

from gmiexp.device import step_boundary


class GMIVecEnv(IVecEnv, metaclass=ABCMeta):
    """Common part of gmiexp's simulators: env_info, time accounting (``time/sim_s``)."""

    #: the keys of ``get_env_state()`` whose first dimension is the environment: a re-shape hands each environment's
    #: rows to whichever GMI steps it next (:mod:`gmiexp.rl.rlgames.carry`); the other keys are the simulator's own
    #: (its generator) and stay the new simulator's. None: the state does not split per environment, or none is saved
    env_state_rows: tuple[str, ...] | None = None

    def __init__(self, num_envs: int, observation_space: gym.Space, action_space: gym.Space) -> None:
        self.num_envs = num_envs
        self.observation_space = observation_space
        self.action_space = action_space
        self.sim_s = 0.0
        self.steps = 0

    def get_env_info(self) -> dict[str, Any]:
        return {
            "observation_space": self.observation_space,
            "action_space": self.action_space,
            "agents": 1,
            "value_size": 1,
        }

    def get_number_of_agents(self) -> int:
        return 1

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        step_boundary(actions)
        t0 = time.perf_counter()
        out = self._step(actions)
        self.sim_s += time.perf_counter() - t0
        self.steps += self.num_envs
        return out

    @abstractmethod
    def _step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """Step the simulator: (obs, reward, done, info with ``time_outs``)."""
