"""mjlab adapter (MuJoCo Warp, torch-native): the simulator for Hopper GPUs, and slow but real on CPU.

Isaac Gym does not run on H100 and is not on PyPI; mjlab installs from PyPI (``gmiexp[mjlab]``)
and steps every environment of a GMI on that GMI's own device. Observations, rewards and dones
come back as torch tensors on that device and are handed to rl-games as they are: no numpy, no
host copy. The mapping follows rl-games' own ``MjlabVecEnv`` (repository head): policy
observations from the ``actor`` group, the ``critic`` group as the central value network's
``states``, ``done = terminated | truncated`` and ``time_outs = truncated`` for value bootstrapping; mjlab's
episode logs (its ``extras["log"]``) go into the infos as ``episode``, where Isaac Lab's rl-games wrapper puts them.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from gmiexp.envs import INSTALL_HINT, MJLAB_DIMS  # noqa: F401 - re-exported for the adapter's users
from gmiexp.envs.vecenv import GMIVecEnv
from gmiexp.envs.warp_cache import configure_warp_cache


#: (actor obs, actions, critic obs) of the tasks gmiexp ships configs for, read from mjlab 1.6.0's
#: observation managers (tests/envs/test_mjlab_env.py checks them): mode=plan and mode=search size
#: the policy and the experience channels without importing mjlab.
def sim_device(device: str) -> str:
    """Where mjlab runs for a GMI on ``device``: its GPU, else the CPU (also for a stand-in model device)."""
    return device if device.startswith("cuda") else "cpu"


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send mjlab's tables and Warp's module-load lines print to stdout, which carries only program output."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


@functools.cache
def observation_dims(env_id: str) -> tuple[int, int, int]:
    """(actor observations, actions, critic observations) of a registered task, from one environment on the CPU.

    For an id the size table (:data:`gmiexp.envs.MJLAB_DIMS`) lacks, so every registered task plans: building
    the environment compiles no Warp kernel (the first step would), but it starts Warp: the cache is set first.
    """
    configure_warp_cache()
    with stdout_to_stderr():
        import mjlab.tasks  # noqa: F401  (registers mjlab's tasks)
        from mjlab.envs import ManagerBasedRlEnv
        from mjlab.tasks.registry import load_env_cfg

        cfg = load_env_cfg(env_id)
        cfg.scene.num_envs = 1
        env = ManagerBasedRlEnv(cfg, device="cpu")
    try:
        dims = env.observation_manager.group_obs_dim
        critic = dims.get("critic", dims["actor"])
        return int(dims["actor"][-1]), int(env.single_action_space.shape[-1]), int(critic[-1])
    finally:
        env.close()


def _box(n: int, bound: float) -> gym.spaces.Box:
    return gym.spaces.Box(-bound, bound, shape=(n,), dtype=np.float32)


class MjlabVecEnv(GMIVecEnv):
    """One ``ManagerBasedRlEnv`` for one GMI; resets finished environments itself (same-step reset).

    ``states=True`` returns ``{"obs": actor, "states": critic}`` for rl-games' central value
    network; otherwise only the actor observations (serving and experience layouts).
    """

    def __init__(self, task_id: str, num_envs: int, seed: int, device: str | torch.device = "cpu",
                 max_episode_length: int | None = None, states: bool = False,
                 render: tuple[int, int] | None = None) -> None:
        configure_warp_cache()
        with stdout_to_stderr():
            import mjlab.tasks  # noqa: F401  (registers mjlab's tasks)
            from mjlab.envs import ManagerBasedRlEnv
            from mjlab.tasks.registry import load_env_cfg

            cfg = load_env_cfg(task_id)
            cfg.scene.num_envs = num_envs
            cfg.seed = seed
            if max_episode_length:  # episode_length_s is how mjlab states it: steps x decimation x timestep
                cfg.episode_length_s = max_episode_length * cfg.decimation * cfg.sim.mujoco.timestep
            if render:  # (width, height): mjlab's offscreen renderer, built with the environment (a video)
                cfg.viewer.width, cfg.viewer.height = render
            self.env = ManagerBasedRlEnv(cfg, device=sim_device(str(device)),
                                         render_mode="rgb_array" if render else None)
        dims = self.env.observation_manager.group_obs_dim
        self.states = states and "critic" in dims
        # rl-games clamps policy outputs to the action space; mjlab's actions are normalised to [-1, 1]
        super().__init__(num_envs, _box(dims["actor"][-1], np.inf), _box(self.env.single_action_space.shape[-1], 1.0))
        self.state_space = _box(dims["critic"][-1], np.inf) if self.states else None
        self.sim_device = torch.device(self.env.device)
        # where the GMI's model is: the simulator's own device on a GPU (nothing moves); a stand-in
        # model device on a CPU host gets the host's tensors, as from any host simulator
        self.device = torch.device(device)

    def get_env_info(self) -> dict[str, Any]:
        info = super().get_env_info()
        if self.states:
            info["state_space"] = self.state_space
            info["use_global_observations"] = True
        return info

    def _out(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device)  # no-op unless the model sits on a stand-in device

    def _obs(self, groups: dict[str, torch.Tensor]) -> torch.Tensor | dict[str, torch.Tensor]:
        if self.states:
            return {"obs": self._out(groups["actor"]), "states": self._out(groups["critic"])}
        return self._out(groups["actor"])

    def reset(self, seed: int | None = None) -> torch.Tensor | dict[str, torch.Tensor]:
        with stdout_to_stderr():
            groups, _extras = self.env.reset(seed=seed)
        return self._obs(groups)

    def render(self) -> np.ndarray:
        """Environment 0's frame (``render`` given at construction)."""
        return self.env.render()

    def _step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        with stdout_to_stderr():  # the first steps load more Warp modules
            groups, rew, terminated, truncated, extras = self.env.step(actions.to(self.sim_device))
        info: dict[str, Any] = {"time_outs": self._out(truncated)}
        if "log" in extras:  # mjlab's episode logs (Curriculum/..., Episode_Reward/...) where Isaac Lab's wrapper puts
            info["episode"] = extras["log"]  # them for rl-games: train.info_key / pbt.objective read them there
        return self._obs(groups), self._out(rew), self._out(terminated | truncated), info

    def close(self) -> None:
        self.env.close()
