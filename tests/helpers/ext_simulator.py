"""A simulator defined outside src/ (tests/test_extension_points.py): ``task.simulator=ext_simulator:Drift``.

``Drift``: a point on a line of ``WIDTH`` cells walks left, stays or steps right (``Discrete(3)``) and is
rewarded for standing on its target; observations are (position, target) scaled to [0, 1]. Every step
rewrites ``$EXT_SIM_DIR/sim_<pid>.json`` (steps so far, its environments, ``EXT_BACKEND_GMI``), so a test
sees that the GMIs stepped it. A task using it is a ``conf/task`` YAML (or overrides) naming it as ``simulator``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from gmiexp.config import TaskConfig
from gmiexp.envs import Simulator
from gmiexp.envs.spaces import TaskSpaces
from gmiexp.envs.vecenv import GMIVecEnv
from gmiexp.errors import invalid

SPEC = f"{__name__}:Drift"
ENV_IDS = ("Drift",)
WIDTH = 8


class DriftVecEnv(GMIVecEnv):
    def __init__(self, num_envs: int, seed: int, max_episode_length: int, device: str) -> None:
        super().__init__(num_envs, gym.spaces.Box(0.0, 1.0, (2,), dtype=np.float32), gym.spaces.Discrete(3))
        self.device, self.limit = torch.device(device), max_episode_length
        self.gen = torch.Generator().manual_seed(seed)
        self.pos = torch.randint(0, WIDTH, (num_envs,), generator=self.gen)
        self.target = torch.randint(0, WIDTH, (num_envs,), generator=self.gen)
        self.t = torch.zeros(num_envs, dtype=torch.long)
        self.witness = {"pid": os.getpid(), "num_envs": num_envs, "steps": 0,
                        "backend_gmi": os.environ.get("EXT_BACKEND_GMI")}

    def obs(self) -> torch.Tensor:
        return (torch.stack([self.pos, self.target], dim=1).float() / (WIDTH - 1)).to(self.device)

    def reset(self) -> torch.Tensor:
        return self.obs()

    def _step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        self.pos = (self.pos + actions.cpu().long().reshape(-1) - 1).clamp(0, WIDTH - 1)
        reward = (self.pos == self.target).float()
        self.t += 1
        done = self.t >= self.limit
        if bool(done.any()):
            k = int(done.sum())
            self.pos[done] = torch.randint(0, WIDTH, (k,), generator=self.gen)
            self.target[done] = torch.randint(0, WIDTH, (k,), generator=self.gen)
            self.t[done] = 0
        self._testify()
        return self.obs(), reward.to(self.device), done.to(self.device), {"time_outs": done.to(self.device)}

    def _testify(self) -> None:
        self.witness["steps"] += 1
        where = os.environ.get("EXT_SIM_DIR")
        if where:
            tmp = Path(where) / f".sim_{os.getpid()}.tmp"
            tmp.write_text(json.dumps(self.witness))
            tmp.replace(Path(where) / f"sim_{os.getpid()}.json")


class Drift(Simulator):
    def check(self, task: TaskConfig) -> None:
        if task.env_id not in ENV_IDS:
            raise invalid(f"{SPEC} env_id", task.env_id, ENV_IDS)
        if task.env_config:
            raise invalid("task.env_config", dict(task.env_config), "{} (Drift takes no extra arguments)")

    def spaces(self, task: TaskConfig) -> TaskSpaces:
        return TaskSpaces((2,), "float32", "discrete", (3,))

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        return DriftVecEnv(num_envs, seed, task.max_episode_length, device)
