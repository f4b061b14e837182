"""Experience-sharing training roles: TDG_EX (synchronous PPO) and decoupled async (asynchronous PPO, or A3C).

Serving GMIs (simulator + agent) collect rollouts of ``train.horizon_length`` records and hand
them to a :class:`~gmiexp.comm.channels.Dispenser` (per-field channels, Compressor, Migrator);
trainer GMIs read them through one :class:`~gmiexp.comm.channels.Batcher` per agent, update the
rl-games model with the learner (:mod:`gmiexp.rl.learner`), reduce gradients among themselves with
the Plan's reduction and publish weights through a :class:`~gmiexp.rl.experience.weights.WeightBoard`.
The agent's loop is :mod:`gmiexp.rl.experience.agent_loop`, the trainer's :mod:`gmiexp.rl.experience.trainer`.

Rollouts overlap by one record: the last record of a rollout (whose value bootstraps the returns)
is sent again as the first record of the next one, so every transition is trained exactly once.
Two fields ride along with the configured ones: ``seq`` (row number per agent, checked by the
trainer: nothing lost, duplicated or reordered) and ``version`` (the weights that produced the row,
for policy lag).
"""

from __future__ import annotations

from typing import Any

from gmiexp.config import AsyncConfig, TrainConfig
from gmiexp.rl.experience import agent_loop, trainer
from gmiexp.rl.rlgames.policy import build_model, experience_fields, probe_spaces
from gmiexp.rl.rlgames.states import StateLayout
from gmiexp.role import Role
from gmiexp.shm.cleanup import cleanup_run


class ExperienceRole(Role):
    """Agent on serving GMIs, trainer on trainer GMIs; ``sync`` makes agents wait for each update."""

    stops_gracefully = True  # agents stop sending rollouts; the trainers drain them, then checkpoint

    sync = False
    train_cfg: TrainConfig
    acfg: AsyncConfig
    states: StateLayout | None

    def run(self) -> dict[str, Any]:
        plan = self.plan
        self.channel = plan.channel
        assert plan.channel is not None and plan.async_train is not None, "an experience layout sets both"
        self.acfg = plan.async_train
        self.train_cfg = plan.train
        self.tag = self.ctx.mgr.run_tag
        self.timeout = float(self.acfg.drain_timeout_s)
        self.spaces = probe_spaces(plan)
        self.model = build_model(plan, self.ctx.gmi, self.spaces, self.device)
        self.states = StateLayout.of(self.model, self.train_cfg.seq_length)  # None: a feed-forward policy
        self.fields = experience_fields(self.spaces, list(self.channel.fields), self.states)
        owned: list[Any] = []
        try:
            if self.ctx.gmi.has("trainer"):
                return trainer.train(self, owned)
            return agent_loop.serve(self, owned)
        finally:
            for x in owned:
                x.close()
            cleanup_run(self.tag)


class TDGEXRole(ExperienceRole):
    """TDG_EX: synchronous; agents wait for the weights of each update (PPO on the trainers)."""

    sync = True


class A3CRole(ExperienceRole):
    """Decoupled async: agents never wait; trainers run advantage actor-critic (or PPO) on arrivals."""

    sync = False


__all__ = ["A3CRole", "ExperienceRole", "TDGEXRole"]
