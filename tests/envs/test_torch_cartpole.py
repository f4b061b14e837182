"""The torch cart-pole against gymnasium's reference implementation, step for step."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from gmiexp.config import TaskConfig
from gmiexp.envs import make_vec_env
from gmiexp.envs.torch_cartpole import TorchCartpole, physics_step


def test_dynamics_match_gymnasium() -> None:
    ref = CartPoleEnv()
    ref.reset(seed=0)
    rng = np.random.default_rng(0)
    state = torch.tensor(ref.state, dtype=torch.float64).unsqueeze(0)
    for _ in range(40):
        a = int(rng.integers(2))
        obs, _r, term, _t, _i = ref.step(a)
        state = physics_step(state, torch.tensor([a]))
        np.testing.assert_allclose(state[0].numpy(), obs, rtol=1e-5, atol=1e-6)
        if term:
            break


def test_autoreset_and_truncation() -> None:
    env = TorchCartpole(4, seed=1, max_episode_length=5)
    env.reset()
    for _ in range(5):
        _obs, rew, term, trunc = env.step(torch.ones(4, dtype=torch.long))
    assert bool(trunc.any() or term.any())
    assert (env.steps <= 5).all()
    assert torch.equal(rew, torch.ones(4))


def test_vec_env_contract() -> None:
    task = TaskConfig(simulator="torch", env_id="Cartpole", max_episode_length=200, continuous=False)
    env = make_vec_env(task, 16, seed=0)
    obs = env.reset()
    assert obs.shape == (16, 4)
    obs, rew, done, info = env.step(torch.zeros(16, dtype=torch.long))
    assert rew.shape == (16,) and done.dtype == torch.bool and "time_outs" in info
    assert env.get_env_info()["action_space"].n == 2
    assert env.steps == 16 and env.sim_s > 0


def test_a_saved_cart_pole_steps_on_as_if_it_never_stopped() -> None:
    """State, step counters and generator: the auto-resets after a load draw what they would have drawn."""
    from gmiexp.envs.cartpole import CartpoleVecEnv

    env = CartpoleVecEnv(8, seed=3, max_episode_length=20)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    actions = [torch.randint(0, 2, (8,), generator=gen) for _ in range(60)]
    for a in actions[:30]:
        env.step(a)
    saved = env.get_env_state()
    on = [env.step(a) for a in actions[30:]]
    again = CartpoleVecEnv(8, seed=99, max_episode_length=20)  # another seed: the saved generator wins
    again.reset()
    again.set_env_state(saved)
    back = [again.step(a) for a in actions[30:]]
    for x, y in zip(on, back, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(x[:3], y[:3], strict=True))
    assert sum(int(x[2].sum()) for x in on) > 8  # auto-resets happened after the load
    again.set_env_state(None)  # rl-games' hook with a checkpoint that has none: nothing changes
