"""Isaac Gym adapter for the IsaacGymEnvs tasks of the paper's Table 6 (imported lazily).

Isaac Gym Preview 4 is not on PyPI (a manual download from NVIDIA, Python <= 3.8)
and does not run on H100, so this path is opt-in and explains how to install it.
"""

from __future__ import annotations

import importlib.util

import torch

from gmiexp.envs.vecenv import GMIVecEnv
from gmiexp.errors import ConfigError

ISAAC_TASKS = ("Ant", "Anymal", "BallBalance", "FrankaCabinet", "Humanoid", "ShadowHand")
INSTALL_HINT = (
    "Isaac Gym is not installed: download Isaac Gym Preview 4 from https://developer.nvidia.com/isaac-gym "
    "(Python 3.6-3.8), `pip install -e isaacgym/python`, then `pip install -e IsaacGymEnvs` "
    "(github.com/isaac-sim/IsaacGymEnvs); gmiexp needs Python >= 3.10, for which Preview 4 has no bindings. "
    "It does not run on H100/H200 (IsaacGymEnvs issue 220); use task=Ant or task=Humanoid (envpool) instead"
)


def check(env_id: str) -> None:
    """Refuse early (exit 2) when the task is unknown or Isaac Gym is missing."""
    if env_id not in ISAAC_TASKS:
        raise ConfigError(f"invalid isaacgym task: {env_id!r}; valid: {', '.join(ISAAC_TASKS)}")
    for mod in ("isaacgym", "isaacgymenvs"):
        if importlib.util.find_spec(mod) is None:
            raise ConfigError(f"task needs the '{mod}' package. {INSTALL_HINT}")


class IsaacGymVecEnv(GMIVecEnv):
    """Wraps ``isaacgymenvs.make`` (GPU tensors in, GPU tensors out)."""

    def __init__(self, env_id: str, num_envs: int, seed: int, device: str = "cuda:0") -> None:
        check(env_id)
        import isaacgym  # noqa: F401  (must precede torch CUDA use)
        import isaacgymenvs

        self.env = isaacgymenvs.make(seed=seed, task=env_id, num_envs=num_envs, sim_device=device,
                                     rl_device=device, graphics_device_id=-1, headless=True)
        super().__init__(num_envs, self.env.observation_space, self.env.action_space)

    def reset(self) -> torch.Tensor:
        return self.env.reset()["obs"]

    def _step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        obs, rew, done, info = self.env.step(actions)
        return obs["obs"], rew, done, info
