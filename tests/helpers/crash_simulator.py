"""A simulator whose environments raise at their first step: a PBT member that fails every time it starts.

``task.simulator=crash_simulator:Crash`` (with ``task.name=Drift task.env_id=Drift``): planning it works as for
:mod:`ext_simulator`'s ``Drift`` (the controller's checks pass), and every GMI then fails in its first epoch, so the
population controller sees a member exit non-zero (tests/pbt/test_controller_failures.py). ``Refuse``'s
environments are bad input instead: a member that exits 2.
"""

from __future__ import annotations

import torch
from ext_simulator import Drift, DriftVecEnv

from gmiexp.config import TaskConfig
from gmiexp.envs.vecenv import GMIVecEnv
from gmiexp.errors import ConfigError

SPEC = f"{__name__}:Crash"
TASK = ["task.name=Drift", f"task.simulator={SPEC}", "task.env_id=Drift"]


class CrashVecEnv(DriftVecEnv):
    def _step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        raise RuntimeError("crash_simulator: this environment fails at its first step (a test's failing member)")


class Crash(Drift):
    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        return CrashVecEnv(num_envs, seed, task.max_episode_length, device)


REFUSE = ["task.name=Drift", f"task.simulator={__name__}:Refuse", "task.env_id=Drift"]


class Refuse(Drift):
    """Bad input only a GMI can see: its environment config names a key the environment lacks (exit 2)."""

    def make(self, task: TaskConfig, num_envs: int, seed: int, sim_threads: int, device: str,
             states: bool) -> GMIVecEnv:
        raise ConfigError("invalid task.env_config key: 'nosuch'; the environment config has no 'nosuch'")
