"""The policy every async/serving GMI runs: rl-games' own network builder on the sync path's params.

``build_model`` goes through ``rl_games.algos_torch.model_builder.ModelBuilder`` with the params
of :func:`gmiexp.rl.rlgames.params.build_params`, so agents and trainers of every layout hold exactly the
model a TCG_EX PPO GMI trains (same MLP, CNN, RNN, heads and normalisers). Observations keep the
simulator's dtype (uint8 frames stay uint8 on the channels) and become floats only at the model's
input (:func:`preproc_obs`, rl-games' ``_preproc_obs``). A recurrent policy carries its states per
environment and zeroes those of finished episodes, as rl-games' ``play_steps_rnn`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from rl_games.algos_torch.model_builder import ModelBuilder
from torch import nn

from gmiexp.comm.channels import FieldSpec
from gmiexp.envs import make_vec_env
from gmiexp.plan import GMI, Plan
from gmiexp.rl.rlgames.params import build_params
from gmiexp.rl.rlgames.states import StateLayout


@dataclass(frozen=True)
class Spaces:
    """What a model and the experience fields need to know about the task."""

    obs_shape: tuple[int, ...]
    continuous: bool
    actions_num: int
    action_low: torch.Tensor | None = None
    action_high: torch.Tensor | None = None
    obs_dtype: torch.dtype = torch.float32  # uint8 for frames (rl-games scales them by 1/255 at the model)
    nvec: tuple[int, ...] = ()  # multi-discrete: actions per branch (``actions_num`` is then their count)

    @classmethod
    def of(cls, env_info: dict[str, Any]) -> Spaces:
        obs, act = env_info["observation_space"], env_info["action_space"]
        dtype = torch.uint8 if np.dtype(obs.dtype) == np.uint8 else torch.float32
        if isinstance(act, gym.spaces.Discrete):
            return cls(tuple(obs.shape), False, int(act.n), obs_dtype=dtype)
        if isinstance(act, gym.spaces.MultiDiscrete):
            nvec = tuple(int(k) for k in np.asarray(act.nvec).reshape(-1))
            return cls(tuple(obs.shape), False, len(nvec), obs_dtype=dtype, nvec=nvec)
        return cls(tuple(obs.shape), True, int(act.shape[0]),
                   torch.as_tensor(act.low, dtype=torch.float32), torch.as_tensor(act.high, dtype=torch.float32),
                   obs_dtype=dtype)

    @property
    def action_field(self) -> FieldSpec:
        """How one row's action travels: float vector, one index, or one index per branch."""
        if self.continuous:
            return FieldSpec("actions", (self.actions_num,), torch.float32)
        if self.nvec:
            return FieldSpec("actions", (len(self.nvec),), torch.int64)
        return FieldSpec("actions", (), torch.int64)


def preproc_obs(obs: torch.Tensor) -> torch.Tensor:
    """What the model sees: uint8 frames scaled to [0, 1] (rl-games' ``_preproc_obs``), other observations as float."""
    return obs.float() / 255.0 if obs.dtype == torch.uint8 else obs.float()


def probe_spaces(plan: Plan) -> Spaces:
    """The task's spaces (observation shape and dtype, action kind) from a one-environment simulator.

    The one place the experience and serving layouts learn them (trainer GMIs step no environments).
    """
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
    if spaces.nvec:  # rl-games' multi-discrete head: one categorical per branch
        params["model"]["name"] = "multi_discrete_a2c"
        params["network"]["space"] = {"multi_discrete": {}}
    with torch.random.fork_rng(devices=[]):  # the GMI's own stream (gmi.seed) goes on untouched
        torch.manual_seed(plan.seed)
        network = ModelBuilder().load(params)
        model = network.build({
            "actions_num": list(spaces.nvec) if spaces.nvec else spaces.actions_num,
            "input_shape": spaces.obs_shape,
            "num_seqs": max(1, gmi.num_envs),
            "value_size": 1,
            "normalize_value": plan.train.normalize_value,
            "normalize_input": plan.train.normalize_input,
        })
    return model.to(device)


def experience_fields(spaces: Spaces, names: list[str], states: StateLayout | None = None) -> list[FieldSpec]:
    """Per-row specs of the configured fields, then ``seq`` and ``version`` (integrity and policy lag).

    A continuous policy adds ``mus`` and ``sigmas`` (the behaviour's Gaussian: rl-games' update reads them for
    its closed-form KL). A recurrent policy adds ``rnn_states``: the states at the start of each
    ``seq_length`` chunk, spread over the chunk's rows (:class:`~gmiexp.rl.learner.sequences.StateLayout`).
    """
    known = {
        "obs": FieldSpec("obs", spaces.obs_shape, spaces.obs_dtype),
        "actions": spaces.action_field,
        "rewards": FieldSpec("rewards", (), torch.float32),
        "values": FieldSpec("values", (), torch.float32),
        "dones": FieldSpec("dones", (), torch.uint8),
        "neglogp": FieldSpec("neglogp", (), torch.float32),
    }
    extra = [FieldSpec(k, (spaces.actions_num,), torch.float32) for k in ("mus", "sigmas") if spaces.continuous]
    extra += [states.field] if states is not None else []
    return [known[n] for n in names] + extra + [FieldSpec("seq", (), torch.int64),
                                                 FieldSpec("version", (), torch.int64)]


class Policy:
    """Inference side: ``act(obs)`` -> actions for the simulator and what the experience records.

    A recurrent model's states (one per environment) ride from step to step; :meth:`reset_done`
    zeroes those of environments whose episode ended (rl-games' ``zero_rnn_on_done``).
    """

    def __init__(self, model: nn.Module, spaces: Spaces, num_envs: int = 0) -> None:
        self.model = model.eval()
        self.spaces = spaces
        self.predictions = 0
        self.layout = StateLayout.of(model, 1) if model.is_rnn() else None
        self.states: tuple[torch.Tensor, ...] | None = None
        if self.layout is not None and num_envs:
            self.states = self.layout.zeros(num_envs, next(model.parameters()).device)

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        if self.layout is not None and self.states is None:
            self.states = self.layout.zeros(obs.shape[0], obs.device)
        res = self.model({"is_train": False, "prev_actions": None, "obs": preproc_obs(obs),
                          "rnn_states": self.states})
        if self.layout is not None:
            self.states = tuple(res["rnn_states"])
        self.predictions += obs.shape[0]
        out = {"actions": res["actions"], "values": res["values"].reshape(-1),
               "neglogp": res["neglogpacs"].reshape(-1)}
        if "mus" in res:  # continuous: the behaviour's Gaussian, for rl-games' closed-form KL on the trainers
            out["mus"], out["sigmas"] = res["mus"], res["sigmas"]
        return out

    def reset_done(self, dones: torch.Tensor) -> None:
        """Zero the recurrent states of the environments whose episode just ended."""
        if self.states is None:
            return
        keep = (dones.reshape(-1) == 0).to(self.states[0].device, self.states[0].dtype).reshape(1, -1, 1)
        self.states = tuple(s * keep for s in self.states)

    def env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """What the simulator steps with: rl-games' clamp and ``rescale_actions`` for continuous actions.

        Its own formula (``a * (high - low) / 2 + (high + low) / 2``), so the simulator steps the actions rl-games'
        agent would hand it, bit for bit (``low + (a + 1) / 2 * (high - low)`` rounds differently).
        """
        if not self.spaces.continuous:
            return actions
        low, high = self.spaces.action_low.to(actions.device), self.spaces.action_high.to(actions.device)
        d, m = (high - low) / 2.0, (high + low) / 2.0
        return actions.clamp(-1.0, 1.0) * d + m


class EpisodeStats:
    """Running episode returns per environment; ``mean()`` over this GMI's last finished episodes.

    :meth:`fields` also lists the episodes finished since the previous row, from which the launcher takes the
    run-wide return over every GMI (:func:`gmiexp.stats.last_episodes`).
    """

    def __init__(self, num_envs: int, window: int = 100) -> None:
        self.ret = torch.zeros(num_envs)
        self.steps = torch.zeros(num_envs)
        self.done: list[float] = []
        self.lengths: list[float] = []
        self.window = window
        self.new: tuple[list[float], list[float]] = ([], [])

    def update(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        self.ret += rewards.detach().float().cpu().reshape(-1)
        self.steps += 1
        d = dones.detach().cpu().reshape(-1).bool()
        if d.any():
            returns, lengths = self.ret[d].tolist(), self.steps[d].tolist()
            self.new[0].extend(returns)
            self.new[1].extend(lengths)
            self.done = (self.done + returns)[-self.window:]
            self.lengths = (self.lengths + lengths)[-self.window:]
            self.ret[d] = 0.0
            self.steps[d] = 0.0

    def restart(self) -> None:
        """The environments were reset: their unfinished episodes count nowhere (rl-games' ``init_current_rewards``)."""
        self.ret.zero_()
        self.steps.zero_()

    def mean_length(self) -> float | None:
        """Mean length (steps) of the last finished episodes (``episode/length``)."""
        return sum(self.lengths) / len(self.lengths) if self.lengths else None

    def mean(self) -> float | None:
        return sum(self.done) / len(self.done) if self.done else None

    def fields(self) -> dict[str, Any]:
        """A history row's episode fields: this GMI's window, and the episodes finished since the last row."""
        out = {"reward/mean": self.mean(), "gmi/reward/mean": self.mean(), "episode/length": self.mean_length(),
               "episodes/returns": self.new[0], "episodes/lengths": self.new[1]}
        self.new = ([], [])
        return out
