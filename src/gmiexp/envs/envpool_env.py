"""envpool adapter (C++ MuJoCo, batched, runs on CPU): the default simulator.

envpool steps all environments in its own thread pool; ``sim_threads`` sizes
that pool so the GMI stays inside its core budget. Its arrays live on the host;
the adapter hands them over on the GMI's device, which is what rl-games expects
of a vec-env that returns tensors (it moves only numpy observations itself).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from gmiexp.envs.base import GMIVecEnv


def _f32_box(space: gym.spaces.Box) -> gym.spaces.Box:
    return gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), dtype=np.float32)


class EnvpoolVecEnv(GMIVecEnv):
    def __init__(self, env_id: str, num_envs: int, seed: int, num_threads: int = 1,
                 max_episode_length: int = 1000, device: str | torch.device = "cpu") -> None:
        import envpool

        self.pool = envpool.make(
            env_id, env_type="gymnasium", num_envs=num_envs, seed=seed,
            num_threads=max(1, num_threads), max_episode_steps=max_episode_length,
        )
        super().__init__(num_envs, _f32_box(self.pool.observation_space), _f32_box(self.pool.action_space))
        self.device = torch.device(device)

    def reset(self) -> torch.Tensor:
        obs, _info = self.pool.reset()
        return torch.from_numpy(np.asarray(obs, dtype=np.float32)).to(self.device)

    def _step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        act = actions.detach().cpu().numpy().astype(np.float64, copy=False)
        obs, rew, term, trunc, _info = self.pool.step(act)
        # envpool resets a finished env on the *next* step; that step's transition
        # (reset obs, zero reward) belongs to no episode, so it is reported as not done.
        done = term | trunc
        dev = self.device
        return (
            torch.from_numpy(np.asarray(obs, dtype=np.float32)).to(dev),
            torch.from_numpy(np.asarray(rew, dtype=np.float32)).to(dev),
            torch.from_numpy(done).to(dev),
            {"time_outs": torch.from_numpy(np.asarray(trunc)).to(dev)},
        )
