"""envpool adapter (C++ MuJoCo, Atari, dm_control, classic control, Box2D; batched, runs on CPU): the default simulator.

envpool steps all environments in its own thread pool; ``sim_threads`` sizes
that pool so the GMI stays inside its core budget. Its arrays live on the host;
the adapter hands them over on the GMI's device, which is what rl-games expects
of a vec-env that returns tensors (it moves only numpy observations itself).
``env_config`` is passed to ``envpool.make`` (Atari's ``stack_num``, ``episodic_life``,
``reward_clip``, ...), less the keys of rl-games' own envpool vec-env (:data:`gmiexp.envs.WRAPPER_KEYS`).
A step's infos are envpool's own (numpy arrays: MuJoCo's ``x_velocity``, ``reward_forward``, ...; what
``train.info_key`` reads) with ``time_outs`` for value bootstrapping.
"""

from __future__ import annotations

from typing import Any

import torch

from gmiexp.envs import envpool_kwargs
from gmiexp.envs.convert import actions_to_numpy, obs_to_torch, policy_action_space, policy_observation_space
from gmiexp.envs.vecenv import GMIVecEnv


class EnvpoolVecEnv(GMIVecEnv):
    def __init__(self, env_id: str, num_envs: int, seed: int, num_threads: int = 1,
                 max_episode_length: int = 1000, device: str | torch.device = "cpu",
                 env_config: dict[str, Any] | None = None) -> None:
        import envpool

        self.pool = envpool.make(
            env_id, env_type="gymnasium", num_envs=num_envs, seed=seed,
            num_threads=max(1, num_threads), max_episode_steps=max_episode_length,
            **envpool_kwargs(dict(env_config or {})),
        )
        super().__init__(num_envs, policy_observation_space(self.pool.observation_space),
                         policy_action_space(self.pool.action_space))
        self.device = torch.device(device)

    def reset(self) -> torch.Tensor:
        obs, _info = self.pool.reset()
        return obs_to_torch(obs, self.device)

    def _step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        obs, rew, term, trunc, info = self.pool.step(actions_to_numpy(actions, self.pool.action_space))
        # envpool resets a finished env on the *next* step; that step's transition
        # (reset obs, zero reward) belongs to no episode, so it is reported as not done.
        done = term | trunc
        dev = self.device
        return (
            obs_to_torch(obs, dev),
            torch.from_numpy(rew.astype("float32", copy=False)).to(dev),
            torch.from_numpy(done).to(dev),
            {**info, "time_outs": torch.from_numpy(trunc).to(dev)},  # envpool's own arrays as they are
        )
