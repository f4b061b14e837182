"""Gymnasium adapter: any registered Gymnasium id, vectorised by Gymnasium's own ``SyncVectorEnv``.

Built with ``gymnasium.make_vec(..., vectorization_mode="sync")`` and same-step autoreset: the step that
ends an episode returns the next episode's first observation, as rl-games' vec-envs do, and truncation
(the time limit, ``max_episode_length``) is reported as ``time_outs``, beside Gymnasium's own vector infos (what
``train.info_key`` reads). ``env_config`` goes to the environment's constructor (``gymnasium.make`` keyword
arguments).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from gmiexp.envs.convert import actions_to_numpy, obs_to_torch, policy_action_space, policy_observation_space
from gmiexp.envs.vecenv import GMIVecEnv


def make_gym_vec(env_id: str, num_envs: int, max_episode_length: int, env_config: dict[str, Any],
                 **extra: Any) -> gym.vector.VectorEnv:
    return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
                        max_episode_steps=max_episode_length, **env_config, **extra)


class GymnasiumVecEnv(GMIVecEnv):
    def __init__(self, env_id: str, num_envs: int, seed: int, max_episode_length: int,
                 device: str | torch.device = "cpu", env_config: dict[str, Any] | None = None) -> None:
        self.envs = make_gym_vec(env_id, num_envs, max_episode_length, dict(env_config or {}))
        super().__init__(num_envs, policy_observation_space(self.envs.single_observation_space),
                         policy_action_space(self.envs.single_action_space))
        self.device = torch.device(device)
        self.seed = seed

    def reset(self) -> torch.Tensor:
        obs, _info = self.envs.reset(seed=self.seed)  # environment i: seed + i
        return obs_to_torch(obs, self.device)

    def _step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        obs, rew, term, trunc, info = self.envs.step(actions_to_numpy(actions, self.envs.single_action_space))
        dev = self.device
        return (
            obs_to_torch(obs, dev),
            torch.from_numpy(rew.astype("float32", copy=False)).to(dev),
            torch.from_numpy(term | trunc).to(dev),
            {**info, "time_outs": torch.from_numpy(trunc & ~term).to(dev)},  # Gymnasium's vector infos as they are
        )

    def close(self) -> None:
        self.envs.close()
