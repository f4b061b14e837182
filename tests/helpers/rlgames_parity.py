"""rl-games agents for parity tests: a deterministic vec env, tiny policies of every kind, a recording agent.

The reference side of :mod:`tests.rl.rlgames.test_fed` and :mod:`tests.rl.experience.test_fed_update`: rl-games'
own ``A2CAgent`` / ``DiscreteA2CAgent`` playing :class:`StepEnv`, keeping the rollout it played
(:meth:`gmiexp.rl.rlgames.fed.Rollout.of_agent`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from rl_games.algos_torch import a2c_continuous, a2c_discrete
from rl_games.common.algo_observer import DefaultAlgoObserver
from rl_games.common.tr_helpers import DefaultRewardsShaper

from gmiexp.rl.rlgames.fed import Rollout

N, H = 4, 16


class StepEnv:
    """A deterministic vec env: observations from a per-env clock, rewards from the actions, staggered episodes."""

    def __init__(self, obs_shape: tuple[int, ...], continuous: bool, frames: bool = False, n: int = N,
                 states: int = 0) -> None:
        """``n`` environments; ``states``: the width of a central value net's state (0: none)."""
        self.obs_shape, self.continuous, self.frames, self.n, self.states = obs_shape, continuous, frames, n, states
        self.t = torch.arange(n, dtype=torch.float32)
        act = gym.spaces.Box(-1.0, 1.0, (2,), np.float32) if continuous else gym.spaces.Discrete(3)
        dtype = np.uint8 if frames else np.float32
        self.info = {"observation_space": gym.spaces.Box(0 if frames else -np.inf, 255 if frames else np.inf,
                                                         obs_shape, dtype),
                     "action_space": act, "agents": 1, "value_size": 1}
        if states:
            self.info["state_space"] = gym.spaces.Box(-np.inf, np.inf, (states,), np.float32)

    def get_env_info(self) -> dict[str, Any]:
        return self.info

    def set_train_info(self, env_frames: int, *args: Any) -> None:
        pass

    def _obs(self) -> Any:
        k = int(np.prod(self.obs_shape))
        # a per-environment offset and scale: the normalisers see different rows on different environments
        env = torch.arange(self.n, dtype=torch.float32).reshape(self.n, 1)
        x = torch.sin(self.t.reshape(self.n, 1) * 0.3 + torch.arange(k, dtype=torch.float32) * 0.7)
        if self.n != N:
            x = x * (1 + 0.2 * env) + 0.3 * env
        x = x.reshape(self.n, *self.obs_shape)
        obs = ((x.clamp(-1, 1) + 1) * 127).to(torch.uint8) if self.frames else x
        if not self.states:
            return obs
        s = torch.cos(self.t.reshape(self.n, 1) * 0.2 + torch.arange(self.states, dtype=torch.float32)) * (1 + env)
        return {"obs": obs, "states": s}

    def reset(self) -> Any:
        return self._obs()

    def step(self, actions: Any) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        a = torch.as_tensor(actions, dtype=torch.float32).reshape(self.n, -1)
        reward = -(a - 0.3).pow(2).sum(1) + torch.cos(self.t)
        self.t = self.t + 1
        done = ((self.t % (5 + torch.arange(self.n))) == 0).to(torch.uint8)
        self.t = torch.where(done.bool(), torch.zeros_like(self.t), self.t)
        return self._obs(), reward, done, {}


def params(tmp: Path, kind: str, **extra: Any) -> dict[str, Any]:
    """rl-games params for a tiny policy of ``kind``: continuous, discrete, cnn or lstm."""
    continuous = kind in ("continuous", "lstm")
    net: dict[str, Any] = {"name": "actor_critic", "separate": False,
                           "mlp": {"units": [16, 8], "activation": "elu", "initializer": {"name": "default"},
                                   "regularizer": {"name": "None"}}}
    if continuous:
        net["space"] = {"continuous": {"mu_activation": "None", "sigma_activation": "None",
                                       "mu_init": {"name": "default"}, "sigma_init": {"name": "const_initializer",
                                                                                      "val": 0},
                                       "fixed_sigma": True}}
    else:
        net["space"] = {"discrete": {}}
    if kind == "cnn":
        net["cnn"] = {"type": "conv2d", "activation": "relu", "initializer": {"name": "default"},
                      "regularizer": {"name": "None"}, "permute_input": True,
                      "convs": [{"filters": 4, "kernel_size": 3, "strides": 2, "padding": 0}]}
    if kind == "lstm":
        net["rnn"] = {"name": "lstm", "units": 8, "layers": 1, "before_mlp": False}
    config = {"name": "parity", "env_name": "none", "num_actors": N, "horizon_length": H, "minibatch_size": 32,
              "mini_epochs": 2, "learning_rate": 3e-3, "lr_schedule": "adaptive", "kl_threshold": 0.008,
              "gamma": 0.99, "tau": 0.95, "e_clip": 0.2, "clip_value": True, "critic_coef": 2.0,
              "entropy_coef": 0.001, "normalize_input": True, "normalize_value": True, "normalize_advantage": True,
              "reward_shaper": DefaultRewardsShaper(scale_value=0.1), "bounds_loss_coef": 0.001, "truncate_grads": True,
              "grad_norm": 1.0, "ppo": True, "device": "cpu", "train_dir": str(tmp), "seq_length": 4,
              "features": {"observer": DefaultAlgoObserver()}, **extra}
    model = "continuous_a2c_logstd" if continuous else "discrete_a2c"
    return {"algo": {"name": "a2c_continuous" if continuous else "a2c_discrete"}, "model": {"name": model},
            "network": net, "config": config}


class Recording:
    """rl-games' agent as it is, keeping the rollout it played (what an agent GMI would send)."""

    rollout: Rollout

    def play_steps(self) -> dict[str, Any]:
        batch = super().play_steps()  # type: ignore[misc]
        self.rollout = Rollout.of_agent(self)
        return batch

    def play_steps_rnn(self) -> dict[str, Any]:
        batch = super().play_steps_rnn()  # type: ignore[misc]
        self.rollout = Rollout.of_agent(self)
        return batch


class RecordingContinuous(Recording, a2c_continuous.A2CAgent):
    pass


class RecordingDiscrete(Recording, a2c_discrete.DiscreteA2CAgent):
    pass


def build(cls: type, p: dict[str, Any], env: Any) -> Any:
    p = copy.deepcopy({**p, "config": {**p["config"], "features": {}}})
    p["config"]["features"]["observer"] = DefaultAlgoObserver()
    p["config"]["env_info"], p["config"]["vec_env"] = env.get_env_info(), env
    torch.manual_seed(0)
    return cls(base_name="run", params=p)
