"""Every simulator family: spaces and dtypes as the policy sees them, seeding, time-outs, refusals (exit 2)."""

from __future__ import annotations

import pytest
import torch

from gmiexp.config import TaskConfig
from gmiexp.envs import check_task, make_vec_env, task_spaces
from gmiexp.errors import ConfigError
from gmiexp.rl.infos import info_value

FAMILIES = {  # (simulator, env id, continuous, obs shape, obs dtype, action dims)
    "atari": ("envpool", "Pong-v5", False, (4, 84, 84), torch.uint8, (6,)),
    "dm_control": ("envpool", "WalkerWalk-v1", True, (24,), torch.float32, (6,)),
    "classic": ("envpool", "CartPole-v1", False, (4,), torch.float32, (2,)),
    "classic-continuous": ("envpool", "Pendulum-v1", True, (3,), torch.float32, (1,)),
    "box2d": ("envpool", "BipedalWalker-v3", True, (24,), torch.float32, (4,)),
    "box2d-discrete": ("envpool", "LunarLander-v2", False, (8,), torch.float32, (4,)),
    "box2d-continuous": ("envpool", "LunarLanderContinuous-v2", True, (8,), torch.float32, (2,)),
    "gymnasium": ("gymnasium", "CartPole-v1", False, (4,), torch.float32, (2,)),
    "gymnasium-continuous": ("gymnasium", "Pendulum-v1", True, (3,), torch.float32, (1,)),
    "gymnasium-mujoco": ("gymnasium", "Ant-v5", True, (105,), torch.float32, (8,)),
}


def task(family: str, length: int = 1000, **kw: object) -> TaskConfig:
    sim, env_id, continuous, *_ = FAMILIES[family]
    return TaskConfig(simulator=sim, env_id=env_id, continuous=continuous, max_episode_length=length, **kw)


def actions(family: str, n: int, gen: torch.Generator) -> torch.Tensor:
    _, _, continuous, _, _, dims = FAMILIES[family]
    if continuous:
        return torch.rand(n, dims[0], generator=gen) * 2 - 1
    return torch.randint(0, dims[0], (n,), generator=gen)


def rollout(family: str, seed: int, steps: int = 6, n: int = 3) -> list[torch.Tensor]:
    env = make_vec_env(task(family), n, seed=seed)
    gen = torch.Generator().manual_seed(0)
    out = [env.reset()]
    for _ in range(steps):
        obs, rew, _done, _info = env.step(actions(family, n, gen))
        out += [obs, rew]
    return out


@pytest.mark.parametrize("family", list(FAMILIES))
def test_spaces_and_dtypes_as_the_policy_sees_them(family: str) -> None:
    _, _, _, shape, dtype, dims = FAMILIES[family]
    t = task(family)
    check_task(t)
    sp = task_spaces(t)
    assert (sp.obs_shape, sp.action_dims) == (shape, dims)
    env = make_vec_env(t, 3, seed=0)
    obs = env.reset()
    assert obs.shape == (3, *shape) and obs.dtype == dtype
    info = env.get_env_info()
    assert tuple(info["observation_space"].shape) == shape
    obs, rew, done, extra = env.step(actions(family, 3, torch.Generator().manual_seed(1)))
    assert obs.dtype == dtype and rew.shape == (3,) and rew.dtype == torch.float32
    assert done.dtype == torch.bool and extra["time_outs"].shape == (3,)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_same_seed_same_rollout_other_seed_differs(family: str) -> None:
    a, b, c = rollout(family, 3), rollout(family, 3), rollout(family, 4)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a, c, strict=True))


@pytest.mark.parametrize("family", ["classic-continuous", "gymnasium-continuous", "dm_control"])
def test_the_episode_limit_is_a_time_out(family: str) -> None:
    """Pendulum never terminates: at max_episode_length every env is done by truncation, reported as a time-out."""
    length = 4
    env = make_vec_env(task(family, length=length), 2, seed=0)
    env.reset()
    seen = []
    for _ in range(length):
        _obs, _rew, done, info = env.step(torch.zeros(2, FAMILIES[family][5][0]))
        seen.append((bool(done.all()), bool(info["time_outs"].all())))
    assert seen[-1] == (True, True) and not any(d for d, _ in seen[:-1])


def test_gymnasium_autoresets_on_the_done_step() -> None:
    """Same-step autoreset (rl-games' convention): the step that ends an episode returns the next one's start."""
    env = make_vec_env(task("gymnasium-continuous", length=2), 1, seed=0)
    first = env.reset()
    env.step(torch.zeros(1, 1))
    obs, _rew, done, _info = env.step(torch.zeros(1, 1))
    assert bool(done[0])
    again = make_vec_env(task("gymnasium-continuous", length=2), 1, seed=0).reset()
    assert torch.equal(first, again) and not torch.equal(obs, first)  # a new episode (its own reset draw)


def test_atari_options_reach_envpool() -> None:
    t = task("atari", env_config={"stack_num": 2, "episodic_life": True, "reward_clip": True})
    check_task(t)
    assert make_vec_env(t, 2, seed=0).reset().shape == (2, 2, 84, 84)
    assert task_spaces(t).obs_shape == (2, 84, 84)


@pytest.mark.parametrize(("t", "message"), [
    (TaskConfig(simulator="envpool", env_id="Pong-v5", continuous=True),
     "task.continuous=True does not match task 'Pong-v5' (envpool), whose actions are discrete"),
    (TaskConfig(simulator="envpool", env_id="Pong-v9", continuous=False),
     "invalid envpool env_id: 'Pong-v9'; valid: Pong-v5"),
    (TaskConfig(simulator="envpool", env_id="Pong-v5", continuous=False, env_config={"stack_nmu": 2}),
     "invalid task.env_config key for envpool Pong-v5: 'stack_nmu'; valid: "),
    (TaskConfig(simulator="gymnasium", env_id="CartPole-v9", continuous=False),
     "invalid gymnasium env_id: 'CartPole-v9'; valid: CartPole-v0, CartPole-v1"),
    (TaskConfig(simulator="gymnasium", env_id="Pendulum-v1", env_config={"g": 9.0, "colour": 1}),
     "invalid task.env_config key for gymnasium Pendulum-v1: 'colour'; valid: g, render_mode"),
    (TaskConfig(simulator="torch", env_id="Cartpole", continuous=False, env_config={"x": 1}),
     "invalid task.env_config: {'x': 1}"),
])
def test_bad_tasks_are_refused_naming_the_valid_ones(t: TaskConfig, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("{", r"\{")):
        check_task(t)


def test_multi_discrete_actions_reach_rl_games_as_a_tuple_and_the_simulator_as_indices() -> None:
    import gymnasium as gym
    import numpy as np

    from gmiexp.envs.convert import actions_to_numpy, policy_action_space
    from gmiexp.envs.spaces import TaskSpaces

    space = gym.spaces.MultiDiscrete([3, 5])
    shown = policy_action_space(space)
    assert isinstance(shown, gym.spaces.Tuple) and [s.n for s in shown.spaces] == [3, 5]  # rl-games' multi_discrete
    sp = TaskSpaces.of(gym.spaces.Box(0, 255, (2, 8, 8), np.uint8), space)
    assert (sp.action, sp.action_dims, sp.actions_num, sp.action_width, sp.obs_dtype) == \
        ("multi_discrete", (3, 5), 8, 2, "uint8")
    assert actions_to_numpy(torch.tensor([[2, 4]]), space).dtype == np.int64


@pytest.mark.parametrize(("family", "key"), [("gymnasium-mujoco", "x_velocity"), ("classic", "elapsed_step")])
def test_a_steps_infos_are_the_simulators_own_beside_time_outs(family: str, key: str) -> None:
    """What ``train.info_key`` reads: MuJoCo's forward velocity (Gymnasium's Ant), envpool's step counter."""
    env = make_vec_env(task(family), 3, seed=0)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    for step in (1, 2):
        _obs, _rew, _done, info = env.step(actions(family, 3, gen))
        assert "time_outs" in info
        value = info_value(info, key)
        assert isinstance(value, float) and (value == step if key == "elapsed_step" else value != 0.0), info
