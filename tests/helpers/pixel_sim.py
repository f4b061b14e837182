"""A pixel simulator for the tests: uint8 frames ``(C, H, W)``, discrete or multi-discrete actions (test double).

Deterministic and cheap: each environment moves a marker along a track of ``W`` columns towards a
target column; frames show the marker and the target (every channel, as a frame stack would).
Registered as ``task.simulator=pixels`` when imported; :func:`main` runs the CLI with it (the
plan-time checks need it registered), and the roles below import this module in every GMI.
Tasks: ``Pixels`` (``Discrete(3)``: left, stay, right) and ``PixelsMulti`` (``MultiDiscrete([3, 2])``:
the second branch earns a bonus when it equals the target's parity).
"""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from hydra.core.config_store import ConfigStore

from gmiexp.config import TaskConfig
from gmiexp.envs import SIMULATORS, Simulator
from gmiexp.envs.spaces import TaskSpaces
from gmiexp.envs.vecenv import GMIVecEnv
from gmiexp.rl.experience.roles import A3CRole, TDGEXRole
from gmiexp.rl.experience.serving import ServeRole

SHAPE = (4, 12, 12)
TASKS = {"Pixels": (3,), "PixelsMulti": (3, 2)}
#: A conv stack as rl-games' Atari configs write it (frames arrive channel-first: no permute)
CNN = {"type": "conv2d", "activation": "relu", "initializer": {"name": "default"}, "regularizer": {"name": "None"},
       "permute_input": False, "convs": [{"filters": 4, "kernel_size": 3, "strides": 2, "padding": 0}]}


class PixelVecEnv(GMIVecEnv):
    def __init__(self, env_id: str, num_envs: int, seed: int, max_episode_length: int = 20,
                 device: str = "cpu") -> None:
        nvec = TASKS[env_id]
        act = gym.spaces.Discrete(nvec[0]) if len(nvec) == 1 else gym.spaces.MultiDiscrete(list(nvec))
        super().__init__(num_envs, gym.spaces.Box(0, 255, SHAPE, dtype=np.uint8), act)
        self.multi, self.device, self.limit = len(nvec) > 1, torch.device(device), max_episode_length
        self.gen = torch.Generator().manual_seed(seed)
        width = SHAPE[2]
        self.pos = torch.randint(0, width, (num_envs,), generator=self.gen)
        self.target = torch.randint(0, width, (num_envs,), generator=self.gen)
        self.steps = torch.zeros(num_envs, dtype=torch.long)

    def frames(self) -> torch.Tensor:
        c, h, w = SHAPE
        f = torch.zeros(self.num_envs, c, h, w, dtype=torch.uint8)
        rows = torch.arange(self.num_envs)
        f[rows, :, :h // 2, self.pos] = 255
        f[rows, :, h // 2:, self.target] = 128
        return f.to(self.device)

    def reset(self) -> torch.Tensor:
        return self.frames()

    def _step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        a = actions.cpu().long().reshape(self.num_envs, -1)
        self.pos = (self.pos + a[:, 0] - 1).clamp(0, SHAPE[2] - 1)
        reward = (self.pos == self.target).float()
        if self.multi:
            reward = reward + 0.5 * (a[:, 1] == self.target % 2).float()
        self.steps += 1
        done = self.steps >= self.limit
        if bool(done.any()):
            k = int(done.sum())
            self.pos[done] = torch.randint(0, SHAPE[2], (k,), generator=self.gen)
            self.steps[done] = 0
        return self.frames(), reward.to(self.device), done.to(self.device), {"time_outs": done.to(self.device)}


class Pixels(Simulator):
    def check(self, task: TaskConfig) -> None:
        from gmiexp.errors import invalid

        if task.env_id not in TASKS:
            raise invalid("pixels env_id", task.env_id, tuple(TASKS))

    def spaces(self, task: TaskConfig) -> TaskSpaces:
        nvec = TASKS[task.env_id]
        return TaskSpaces(SHAPE, "uint8", "discrete" if len(nvec) == 1 else "multi_discrete", nvec)

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        return PixelVecEnv(task.env_id, num_envs, seed, task.max_episode_length, device)


SIMULATORS.register("pixels")(Pixels)


def register() -> None:
    """The ``task=pixels`` / ``task=pixels_multi`` config nodes (what ``conf/task/*.yaml`` would hold)."""
    for name, env_id in (("pixels", "Pixels"), ("pixels_multi", "PixelsMulti")):
        ConfigStore.instance().store(group="task", name=name, node=TaskConfig(
            name=env_id, simulator="pixels", env_id=env_id, continuous=False, mlp_units=[16],
            max_episode_length=20, cnn=dict(CNN)))


class PixelTDGEX(TDGEXRole):
    """tdg_ex's role, importable in the GMIs (importing this module registers the simulator there)."""


class PixelA3C(A3CRole):
    """decoupled_async's role, importable in the GMIs."""


class PixelServe(ServeRole):
    """tcg's role, importable in the GMIs."""


def main(argv: list[str]) -> Any:
    """``python -m gmiexp argv`` with the simulator and its task nodes registered first."""
    from gmiexp.__main__ import main as gmiexp_main

    register()
    sys.argv = ["gmiexp", *argv]
    return gmiexp_main()
