"""The tests' own rsl_rl VecEnv: a batch of 1-D point masses pushed towards the origin (``task.vec_env``'s seam).

What a user's Isaac Lab or custom VecEnv provides to ``train=rslrl``: ``num_envs``, ``num_actions``,
``max_episode_length``, ``episode_length_buf``, ``device``, ``cfg``, ``get_observations()`` (a TensorDict of
observation groups) and ``step(actions)``. Seeded from ``seed`` so that each GMI steps its own stream.
"""

from __future__ import annotations

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict


class PointMass(VecEnv):
    """Position and velocity observed; reward ``-x^2``; episodes of ``max_episode_length`` steps."""

    def __init__(self, num_envs: int, device: str, seed: int, max_episode_length: int = 16) -> None:
        self.num_envs, self.num_actions, self.device = num_envs, 1, "cpu" if device == "lazy" else device
        self.max_episode_length = max_episode_length
        self.cfg = {"name": "point_mass"}
        self.gen = torch.Generator().manual_seed(seed)
        self.state = torch.rand(num_envs, 2, generator=self.gen) * 2 - 1
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.step_dt = 0.02  # rsl_rl's RND scales its weight by ``env.unwrapped.step_dt`` (Isaac Lab's and mjlab's)

    @property
    def unwrapped(self) -> PointMass:
        return self

    def get_observations(self) -> TensorDict:
        return TensorDict({"policy": self.state.clone()}, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        a = actions.reshape(self.num_envs, 1).clamp(-1, 1)
        self.state[:, 1:] += 0.1 * a
        self.state[:, :1] += 0.1 * self.state[:, 1:]
        reward = -self.state[:, 0] ** 2
        self.episode_length_buf += 1
        done = self.episode_length_buf >= self.max_episode_length
        n = int(done.sum())
        extras: dict = {"time_outs": done.clone(), "log": {}}  # episode logs at the steps some episode ends, as
        if n:  # Isaac Lab's and mjlab's environments write them (``Episode_Reward/...``, ``Curriculum/...``)
            extras["log"]["Episode/final_distance"] = self.state[done, 0].abs().mean()
            self.state[done] = torch.rand(n, 2, generator=self.gen) * 2 - 1
            self.episode_length_buf[done] = 0
        return self.get_observations(), reward, done.long(), extras

    def close(self) -> None:
        pass


def make(env_id: str, *, num_envs: int, device: str, seed: int, **kw: object) -> PointMass:
    """The factory ``task.vec_env=rslrl_vecenv:make`` names."""
    return PointMass(num_envs, device, seed, **kw)  # type: ignore[arg-type]
