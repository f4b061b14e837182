"""The TDG_EX trainer's update: rl-games' own agent on the rollouts the channels deliver.

With one trainer GMI and no replay, layout tdg_ex trains with rl-games' ``A2CAgent`` / ``DiscreteA2CAgent``
(:mod:`gmiexp.rl.rlgames.fed`, built through rl-games' ``Runner`` and algo factory, as tcg_ex builds its agent),
so the update is the one tcg_ex makes on the same batch: both bound-loss types, smooth clamp, value clipping,
the normalisers, the schedules with rl-games' closed-form KL, mixed precision, ``torch_compile``, gradient
clipping, ``mini_epochs``, ``minibatch_size``, ``horizon_length`` steps per rollout (recurrent ones too).
:class:`FedUpdate` has the :class:`~gmiexp.rl.learner.update.Learner`'s interface, so the trainer loop
(:class:`~gmiexp.rl.experience.trainer.TrainLoop`) drives either; several trainers, replay and decoupled async
keep the learner (their gradients and stale rows need its row-weighted reductions).

A round's rollouts (one per agent, ``horizon_length + 1`` records each, step-major) become one rl-games
:class:`~gmiexp.rl.rlgames.fed.Rollout` of all their environments: the first ``horizon_length`` records are
the steps, the last one gives rl-games' ``last_values``; the channels carry ``dones`` as "this step ended an
episode", and rl-games stores "an episode ended before this step", so each agent's last flag is kept for its
next rollout (all set before the first, as rl-games starts, and after the bootstrap record's flag: the agent
resets its environments before the next rollout, ``epochs_between_resets``).
"""

from __future__ import annotations

import time
from typing import Any

import torch
from rl_games.common.algo_observer import DefaultAlgoObserver
from rl_games.torch_runner import Runner

from gmiexp.envs import make_vec_env
from gmiexp.rl.experience.seat import ExperienceSeat
from gmiexp.rl.rlgames import checkpoint
from gmiexp.rl.rlgames.fed import FedContinuousAgent, FedDiscreteAgent, FedRollouts, Rollout, RolloutSource
from gmiexp.rl.rlgames.params import build_params
from gmiexp.rl.rlgames.states import FIELD, StateLayout


def applies(role: ExperienceSeat) -> bool:
    """Whether this trainer runs rl-games' agent: tdg_ex (sync), one trainer, no replay, no central value net."""
    plan = role.plan
    return role.sync and len(plan.trainer_group) == 1 and role.acfg.replay_ratio == 0 and not plan.task.central_value


def build_agent(role: ExperienceSeat, num_envs: int) -> FedRollouts:
    """rl-games' agent for ``num_envs`` environments through its Runner and algo factory; it steps none."""
    plan = role.plan
    env = make_vec_env(plan.task, 1, seed=plan.seed)
    try:
        env_info = env.get_env_info()
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            close()
    params = build_params(plan, role.ctx.gmi, num_envs=num_envs, device=str(role.device))
    if role.spaces.nvec:  # as gmiexp.rl.rlgames.policy.build_model: one categorical per branch
        params["model"]["name"] = "multi_discrete_a2c"
        params["network"]["space"] = {"multi_discrete": {}}
    runner = Runner(algo_observer=DefaultAlgoObserver())
    runner.algo_factory.register_builder("a2c_continuous", lambda **kw: FedContinuousAgent(**kw))
    runner.algo_factory.register_builder("a2c_discrete", lambda **kw: FedDiscreteAgent(**kw))
    runner.load({"params": params})
    runner.params["config"]["env_info"] = env_info  # rl-games' own way to train around an env it did not create
    runner.params["config"]["vec_env"] = RolloutSource(env_info)
    return runner.algo_factory.create(runner.algo_name, base_name="run", params=runner.params)


def compile_model(agent: FedRollouts) -> None:
    """``train.torch_compile`` as rl-games' ``Runner.run_train`` applies it (after building the agent).

    rl-games compiles unless ``torch_compile`` is false; gmiexp exports false unless the config turns it on.
    The uncompiled module stays the one the trainer publishes and checkpoints (the compiled one shares it).
    """
    mode = agent.config.get("torch_compile", True)
    if mode is False:
        return
    if isinstance(mode, dict):
        mode = mode.get("mode", "default")
    agent.model = torch.compile(agent.model, mode=mode if isinstance(mode, str) else "default")


def as_rollout(fresh: list[tuple[int, int, dict[str, torch.Tensor]]], horizon: int, before: dict[int, torch.Tensor],
               states: StateLayout | None) -> Rollout:
    """One rl-games rollout of every agent's environments (``fresh``: ``(agent, num_envs, batch)``)."""
    parts: dict[str, list[torch.Tensor]] = {}
    last_values, last_dones, rnn = [], [], []
    for agent, n, b in fresh:
        rec = horizon + 1
        step = {k: v.reshape(rec, n, *v.shape[1:]) for k, v in b.items()}
        after = step["dones"][:horizon]
        first = before.get(agent, torch.ones(n, dtype=torch.uint8))
        dones = torch.cat([first.reshape(1, n).to(after.dtype), after[:-1]])
        before[agent] = torch.maximum(after[-1], step["dones"][horizon])  # the bootstrap flag: a reset follows
        fields = {"obses": step["obs"][:horizon], "actions": step["actions"][:horizon],
                  "neglogpacs": step["neglogp"][:horizon], "values": step["values"][:horizon].unsqueeze(-1),
                  "rewards": step["rewards"][:horizon].unsqueeze(-1), "dones": dones}
        if "mus" in step:
            fields["mus"], fields["sigmas"] = step["mus"][:horizon], step["sigmas"][:horizon]
        for k, v in fields.items():
            parts.setdefault(k, []).append(v)
        last_values.append(step["values"][horizon].reshape(n, 1))
        last_dones.append(after[-1])
        if states is not None:  # (n * chunks, count, layers, units), environment-major -> rl-games' mb_rnn_states
            s = states.chunk_starts(b[FIELD], rec, n)
            chunks = horizon // states.seq_length
            s = s.reshape(n, chunks, states.count, states.layers, states.units)
            rnn.append([s[:, :, i].permute(1, 2, 0, 3) for i in range(states.count)])
    rollout = Rollout({k: torch.cat(v, dim=1) for k, v in parts.items()}, torch.cat(last_values),
                      torch.cat(last_dones))
    if states is not None:
        rollout.rnn_states = [torch.cat([r[i] for r in rnn], dim=2) for i in range(states.count)]
    return rollout


class FedUpdate:
    """rl-games' agent behind the learner's interface (``step``, ``opt``, ``lr``, ``last_kl``, counters)."""

    def __init__(self, role: ExperienceSeat, agents: dict[int, int]) -> None:
        self.role, self.agents = role, agents  # agent GMI -> its environments
        self.horizon = role.train_cfg.horizon_length
        self.agent = build_agent(role, sum(agents.values()))
        self.agent.model.load_state_dict(role.model.state_dict())  # the weights every GMI starts from
        role.model = self.agent.model  # what the trainer publishes, digests and checkpoints (never compiled)
        self.agent.init_tensors()
        self.opt = self.agent.optimizer
        self.before: dict[int, torch.Tensor] = {}
        self.agent.beat = lambda: role.heartbeat(stage="training")
        compile_model(self.agent)
        self.lr = float(self.agent.last_lr)
        self.last_kl = self.last_loss = 0.0
        self.train_s = self.comm_s = 0.0
        self.frames = 0  # rows trained in this run
        self._epoch0 = self._frame0 = 0
        self.start_digest = ""

    @property
    def epoch0(self) -> int:
        """The checkpoint's epoch: rl-games' agent counts on from it (its schedules read ``epoch_num``)."""
        return self._epoch0

    @epoch0.setter
    def epoch0(self, epoch: int) -> None:
        self._epoch0 = self.agent.epoch_num = int(epoch)

    @property
    def frame0(self) -> int:
        return self._frame0

    @frame0.setter
    def frame0(self, frame: int) -> None:
        self._frame0 = self.agent.frame = int(frame)

    def schedule_state(self) -> dict[str, float]:
        """rl-games' rate and entropy coefficient as its scheduler left them, for the checkpoint."""
        return checkpoint.schedule_state(self.agent)

    def restore_schedule(self, state: dict[str, Any]) -> None:
        """Go on with a checkpoint's rate (as tcg_ex's agent does); one without it: the config's, as rl-games."""
        checkpoint.restore_schedule(self.agent, state)
        for group in self.opt.param_groups:
            group["lr"] = self.agent.last_lr
        self.lr = float(self.agent.last_lr)

    def sync_initial_weights(self) -> None:
        """One trainer: its weights are the run's."""

    def step(self, fresh: list[tuple[int, dict[str, torch.Tensor]]], done: bool,
             off_policy: bool = False) -> tuple[int, int, bool]:
        """Train one round (a rollout of every agent); returns (rows, rows, done) as the learner does.

        rl-games trains a fixed batch (``horizon_length`` x its environments): a round without every agent's
        rollout (an agent stopped early on a Ctrl-C) is not trained.
        """
        assert not off_policy, "replay keeps the learner (gmiexp.rl.experience.fed_update.applies)"
        if len(fresh) != len(self.agents):
            return 0, 0, done
        t0 = time.perf_counter()
        # the trainer loop hands a round's rollouts in agent order (TrainLoop.run)
        rollout = as_rollout([(a, n, b) for a, (n, b) in zip(sorted(self.agents), fresh, strict=True)], self.horizon,
                             self.before, self.role.states)
        ag = self.agent
        ag.vec_env.put(rollout)
        ag.update_epoch()
        result = ag.train_epoch()
        ag.frame += int(ag.curr_frames)
        ag.dataset.update_values_dict(None)  # as rl-games' loop frees it
        kls, last_lr, lr_mul = result[-3], result[-2], result[-1]
        self.last_kl = float(torch.stack(list(kls)).mean()) if kls else 0.0
        self.lr = float(last_lr) * float(lr_mul)
        self.last_loss = float(torch.stack([torch.as_tensor(x).detach().float().mean().cpu()
                                            for x in result[4]]).mean())  # rl-games' actor losses
        self.train_s += time.perf_counter() - t0
        rows = self.horizon * sum(self.agents.values())
        self.frames += rows
        return rows, rows, done


__all__ = ["FedUpdate", "applies", "as_rollout", "build_agent"]
