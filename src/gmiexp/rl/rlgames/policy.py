"""The policy every async/serving GMI runs: rl-games' own network builder on the sync path's params.

``build_model`` goes through ``rl_games.algos_torch.model_builder.ModelBuilder`` with the params
of :func:`gmiexp.rl.rlgames.params.build_params`, so agents and trainers of every layout hold exactly the
model a TCG_EX PPO GMI trains (same MLP, heads and normalisers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch
from rl_games.algos_torch.model_builder import ModelBuilder
from torch import nn

from gmiexp.comm.channels import FieldSpec
from gmiexp.envs import make_vec_env
from gmiexp.plan import GMI, Plan
from gmiexp.rl.rlgames.params import build_params


@dataclass(frozen=True)
class Spaces:
    """What a model and the experience fields need to know about the task."""

    obs_shape: tuple[int, ...]
    continuous: bool
    actions_num: int
    action_low: torch.Tensor | None = None
    action_high: torch.Tensor | None = None

    @classmethod
    def of(cls, env_info: dict[str, Any]) -> Spaces:
        obs, act = env_info["observation_space"], env_info["action_space"]
        if isinstance(act, gym.spaces.Discrete):
            return cls(tuple(obs.shape), False, int(act.n))
        return cls(tuple(obs.shape), True, int(act.shape[0]),
                   torch.as_tensor(act.low, dtype=torch.float32), torch.as_tensor(act.high, dtype=torch.float32))


def probe_spaces(plan: Plan) -> Spaces:
    """The task's spaces from a one-environment simulator (trainer GMIs step no environments)."""
    env = make_vec_env(plan.task, 1, seed=plan.seed)
    try:
        return Spaces.of(env.get_env_info())
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            close()


def build_model(plan: Plan, gmi: GMI, spaces: Spaces, device: torch.device) -> nn.Module:
    """rl-games' actor-critic for ``plan`` (identical initial weights on every GMI: seeded)."""
    params = build_params(plan, gmi, num_envs=max(1, gmi.num_envs), device=str(device))
    torch.manual_seed(plan.seed)
    network = ModelBuilder().load(params)
    model = network.build({
        "actions_num": spaces.actions_num,
        "input_shape": spaces.obs_shape,
        "num_seqs": max(1, gmi.num_envs),
        "value_size": 1,
        "normalize_value": plan.train.normalize_value,
        "normalize_input": plan.train.normalize_input,
    })
    return model.to(device)


def experience_fields(spaces: Spaces, names: list[str]) -> list[FieldSpec]:
    """Per-row specs of the configured fields, then ``seq`` and ``version`` (integrity and policy lag)."""
    act = FieldSpec("actions", (spaces.actions_num,), torch.float32) if spaces.continuous \
        else FieldSpec("actions", (), torch.int64)
    known = {
        "obs": FieldSpec("obs", spaces.obs_shape, torch.float32),
        "actions": act,
        "rewards": FieldSpec("rewards", (), torch.float32),
        "values": FieldSpec("values", (), torch.float32),
        "dones": FieldSpec("dones", (), torch.uint8),
        "neglogp": FieldSpec("neglogp", (), torch.float32),
    }
    return [known[n] for n in names] + [FieldSpec("seq", (), torch.int64), FieldSpec("version", (), torch.int64)]


class Policy:
    """Inference side: ``act(obs)`` -> actions for the simulator and what the experience records."""

    def __init__(self, model: nn.Module, spaces: Spaces) -> None:
        self.model = model.eval()
        self.spaces = spaces
        self.predictions = 0

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        res = self.model({"is_train": False, "prev_actions": None, "obs": obs, "rnn_states": None})
        self.predictions += obs.shape[0]
        return {"actions": res["actions"], "values": res["values"].reshape(-1),
                "neglogp": res["neglogpacs"].reshape(-1)}

    def env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """What the simulator steps with (rl-games' clamp and rescale for continuous actions)."""
        if not self.spaces.continuous:
            return actions
        low, high = self.spaces.action_low.to(actions.device), self.spaces.action_high.to(actions.device)
        a = actions.clamp(-1.0, 1.0)
        return low + (a + 1.0) * 0.5 * (high - low)


class EpisodeStats:
    """Running episode returns per environment; ``mean()`` over the last finished episodes."""

    def __init__(self, num_envs: int, window: int = 100) -> None:
        self.ret = torch.zeros(num_envs)
        self.steps = torch.zeros(num_envs)
        self.done: list[float] = []
        self.lengths: list[float] = []
        self.window = window

    def update(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        self.ret += rewards.detach().float().cpu().reshape(-1)
        self.steps += 1
        d = dones.detach().cpu().reshape(-1).bool()
        if d.any():
            self.done.extend(self.ret[d].tolist())
            self.done = self.done[-self.window:]
            self.lengths.extend(self.steps[d].tolist())
            self.lengths = self.lengths[-self.window:]
            self.ret[d] = 0.0
            self.steps[d] = 0.0

    def mean_length(self) -> float | None:
        """Mean length (steps) of the last finished episodes (``episode/length``)."""
        return sum(self.lengths) / len(self.lengths) if self.lengths else None

    def mean(self) -> float | None:
        return sum(self.done) / len(self.done) if self.done else None
