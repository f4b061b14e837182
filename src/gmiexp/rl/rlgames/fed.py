"""rl-games' own PPO update on rollouts stepped elsewhere: the trainer agent of the experience layouts.

A trainer GMI steps no environment, so it cannot run rl-games' ``play_steps``; everything after the rollout
(``prepare_dataset``, the mini-epochs of ``calc_gradients``, both bound-loss types, smooth clamp, value
clipping, the normalisers, the schedulers with rl-games' closed-form KL, mixed precision, gradient
clipping) is rl-games' agent itself, so the update is the one layout tcg_ex makes (one implementation,
not a second learner). Only the rollout changes hands, through rl-games' own extension points:

* the agent is built with ``config['env_info']`` and ``config['vec_env']``, rl-games' way to train around
  an environment it did not create; the ``vec_env`` is a :class:`RolloutSource`, which holds the next
  :class:`Rollout` and steps nothing;
* :class:`FedRollouts` overrides ``play_steps`` / ``play_steps_rnn``: it writes the rollout into rl-games'
  ``ExperienceBuffer`` and builds the batch as rl-games' own methods end (``discount_values`` over all
  ``horizon_length`` steps with the bootstrap value, ``swap_and_flatten01``, the chunk-start recurrent
  states permuted as rl-games permutes them).

:meth:`Rollout.of_agent` reads one back from an rl-games agent that has just played its steps: what the
channels must carry for the update to be rl-games' (``mus`` and ``sigmas`` for the closed-form KL, the
stored ``dones`` of rl-games, which flag the step that *starts* an episode, the bootstrap value and done).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from rl_games.algos_torch import a2c_continuous, a2c_discrete
from rl_games.common.a2c_common import swap_and_flatten01

from gmiexp.rl.rlgames.lazy import lazy_scalar_guard, unfused_adam

#: The step fields of rl-games' ``ExperienceBuffer`` a rollout carries (``mus``/``sigmas``: continuous only;
#: ``states``: a central value net's input).
STEP_FIELDS = ("obses", "actions", "neglogpacs", "values", "mus", "sigmas", "rewards", "dones", "states")


@dataclass
class Rollout:
    """One rollout of ``horizon_length`` steps of ``n`` environments, in rl-games' buffer layout.

    ``steps``: ``(horizon, n, ...)`` tensors named as rl-games' ``ExperienceBuffer`` names them;
    ``last_values``: ``(n, value_size)`` values of the observation after the last step (rl-games'
    ``get_values``); ``last_dones``: ``(n,)`` whether the last step ended an episode; ``rnn_states``:
    rl-games' ``mb_rnn_states`` (``(horizon // seq_length, layers, n, units)`` each) for a recurrent policy.
    """

    steps: dict[str, torch.Tensor]
    last_values: torch.Tensor
    last_dones: torch.Tensor
    rnn_states: list[torch.Tensor] | None = None

    @classmethod
    def of_agent(cls, agent: Any) -> Rollout:
        """The rollout an rl-games agent has just played (call it right after its ``play_steps``, in eval mode).

        What an agent GMI would send: its buffer's step fields, and the bootstrap value rl-games computes.
        """
        buf = agent.experience_buffer.tensor_dict
        steps = {k: buf[k].clone() for k in STEP_FIELDS if k in buf}
        with torch.no_grad():
            last = agent.get_values(agent.obs).clone()
        states = [s.clone() for s in agent.mb_rnn_states] if agent.is_rnn else None
        return cls(steps, last, agent.dones.clone(), states)


@dataclass
class RolloutSource:
    """rl-games' ``vec_env`` of a trainer agent: the task's ``env_info`` and the next rollout, no simulator.

    rl-games calls ``get_env_info`` and ``set_train_info`` on it; :class:`FedRollouts` takes the rollout.
    """

    env_info: dict[str, Any]
    queue: list[Rollout] = field(default_factory=list)

    def get_env_info(self) -> dict[str, Any]:
        return self.env_info

    def set_train_info(self, env_frames: int, *args: Any, **kwargs: Any) -> None:
        """rl-games tells its env the frame count each epoch; nothing here depends on it."""

    def put(self, rollout: Rollout) -> None:
        self.queue.append(rollout)

    def take(self) -> Rollout:
        if not self.queue:
            raise RuntimeError("the trainer agent was asked to train before a rollout was put")
        return self.queue.pop(0)


class FedRollouts:
    """``play_steps`` from a :class:`RolloutSource`; mixed into rl-games' A2C agents before them.

    The tail is rl-games 1.6.5's ``play_steps`` / ``play_steps_rnn`` after its environment loop, on the
    agent's own ``discount_values`` and buffer, so the batch is the one rl-games would build.
    """

    def __init__(self, base_name: str, params: dict[str, Any]) -> None:
        super().__init__(base_name, params)  # type: ignore[call-arg]
        self.optimizer = unfused_adam(self.model, self.optimizer, self.last_lr,  # type: ignore[attr-defined]
                                      self.weight_decay)  # type: ignore[attr-defined]

    #: called before every minibatch's gradients (a trainer GMI's heartbeat: an epoch may outlast its timeout)
    beat: Callable[[], None] | None = None

    def calc_gradients(self, input_dict: dict[str, Any]) -> None:
        if self.beat is not None:
            self.beat()
        with lazy_scalar_guard(self.model):  # type: ignore[attr-defined]
            super().calc_gradients(input_dict)  # type: ignore[misc]

    def env_reset(self) -> Any:
        """No environment to reset: observations arrive with the rollouts."""
        return None

    def _fill(self) -> tuple[Rollout, dict[str, Any]]:
        r = self.vec_env.take()  # type: ignore[attr-defined]
        buf = self.experience_buffer.tensor_dict  # type: ignore[attr-defined]
        for k, v in r.steps.items():
            if k in buf:
                buf[k].copy_(v.reshape(buf[k].shape))
        dev = buf["values"].device
        mb_fdones = buf["dones"].float()
        mb_values, mb_rewards = buf["values"], buf["rewards"]
        mb_advs = self.discount_values(r.last_dones.to(dev).float(), r.last_values.to(dev),  # type: ignore[attr-defined]
                                       mb_fdones, mb_values, mb_rewards)
        mb_returns = mb_advs + mb_values
        batch = self.experience_buffer.get_transformed_list(swap_and_flatten01, self.tensor_list)  # type: ignore[attr-defined]
        batch["returns"] = swap_and_flatten01(mb_returns)
        batch["played_frames"] = self.batch_size  # type: ignore[attr-defined]
        batch["step_time"] = 0.0
        return r, batch

    def play_steps(self) -> dict[str, Any]:
        return self._fill()[1]

    def play_steps_rnn(self) -> dict[str, Any]:
        r, batch = self._fill()
        assert r.rnn_states is not None, "a recurrent policy's rollout carries its chunk-start states"
        states = []
        for mb_s in r.rnn_states:  # rl-games' own permutation of mb_rnn_states
            t_size = mb_s.size()[0] * mb_s.size()[2]
            states.append(mb_s.to(batch["returns"].device).permute(1, 2, 0, 3).reshape(-1, t_size, mb_s.size()[3]))
        batch["rnn_states"] = states
        return batch


class FedContinuousAgent(FedRollouts, a2c_continuous.A2CAgent):
    """rl-games' continuous PPO on rollouts from a :class:`RolloutSource`."""


class FedDiscreteAgent(FedRollouts, a2c_discrete.DiscreteA2CAgent):
    """rl-games' discrete PPO on rollouts from a :class:`RolloutSource`."""


__all__ = ["STEP_FIELDS", "FedContinuousAgent", "FedDiscreteAgent", "FedRollouts", "Rollout", "RolloutSource"]
