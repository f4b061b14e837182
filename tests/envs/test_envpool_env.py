from __future__ import annotations

import pytest
import torch

from gmiexp.config import TaskConfig
from gmiexp.envs import check_task, make_vec_env
from gmiexp.errors import ConfigError


@pytest.mark.parametrize(("env_id", "obs_dim", "act_dim"), [("Ant-v4", 27, 8), ("Humanoid-v4", 376, 17)])
def test_envpool_mujoco_steps(env_id: str, obs_dim: int, act_dim: int) -> None:
    task = TaskConfig(simulator="envpool", env_id=env_id, max_episode_length=1000, continuous=True)
    check_task(task)
    env = make_vec_env(task, 4, seed=0)
    obs = env.reset()
    assert obs.shape == (4, obs_dim) and obs.dtype == torch.float32
    obs, rew, done, info = env.step(torch.zeros(4, act_dim))
    assert rew.dtype == torch.float32 and done.shape == (4,)
    assert env.get_env_info()["action_space"].shape == (act_dim,)


def test_isaacgym_missing_explains_install() -> None:
    with pytest.raises(ConfigError, match="Isaac Gym is not installed"):
        check_task(TaskConfig(simulator="isaacgym", env_id="Ant", max_episode_length=1000, continuous=True))


def test_unknown_isaac_task() -> None:
    with pytest.raises(ConfigError, match="invalid isaacgym task: 'Pong'"):
        check_task(TaskConfig(simulator="isaacgym", env_id="Pong", max_episode_length=1000, continuous=True))
