"""The agent loop of the experience layouts.

A serving GMI steps its simulator with the newest weights and sends each rollout to the trainers:
``train.horizon_length`` stepped records, all of them trained (as rl-games counts its horizon), and one
bootstrap record after them (the observation the next rollout starts from, with its value: rl-games'
``last_values``). The bootstrap record is not stepped: the next rollout acts on the same observation again
with the weights of its own iteration, so every trained action comes from the policy of its rollout.

The rows are the rollout rl-games' ``play_steps`` would store (:class:`Collector`, tested against rl-games' own
agent in ``tests/rl/experience/test_agent_loop.py``): its action rescale, its reward shaper, its
``value_bootstrap`` (a step the time limit cut earns ``gamma`` x its value), ``zero_rnn_on_done`` and
``epochs_between_resets`` (:class:`Play`).

``train.score_to_win`` stops the run as in rl-games: the first agent whose mean return over its last 100
episodes passes it writes :data:`SCORE_FILE` in the run dir, and every agent stops at its next iteration (the
trainers then drain and checkpoint, as after a Ctrl-C). One node's agents share it (each node has its run dir).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rl_games.common.tr_helpers import DefaultRewardsShaper

from gmiexp.comm.channels import Dispenser, FieldSpec, Migrator, Route, make_channel_set
from gmiexp.config import TrainConfig
from gmiexp.rl.experience import links
from gmiexp.rl.experience.env import as_tensor, make_env, on_device
from gmiexp.rl.experience.meter import Meter
from gmiexp.rl.experience.seat import ExperienceSeat
from gmiexp.rl.rlgames.policy import EpisodeStats, Policy
from gmiexp.rl.rlgames.states import StateLayout
from gmiexp.signals import stop_requested


def reward_shaper(task: Any) -> DefaultRewardsShaper:
    """rl-games' own reward shaper for the task (scale, and ``task.reward_shaper``'s shift, clip and log).

    The same shaper rl-games' agent applies in tcg_ex, so Pong's clip and WalkerWalk's log reward mean the
    same in every layout.
    """
    return DefaultRewardsShaper(**{**dict(task.reward_shaper), "scale_value": task.reward_scale})


#: Written in the run dir by the first agent whose mean return passes ``train.score_to_win``.
SCORE_FILE = "score_to_win_reached"


def won_score(mean: float | None, score: float | None) -> bool:
    """rl-games' ``score_to_win``: the mean return over the last episodes (100 here) above the score."""
    return score is not None and mean is not None and mean > score


def stepped_rewards(shaped: torch.Tensor, values: torch.Tensor, info: Any, gamma: float | None) -> torch.Tensor:
    """A step's rewards as rl-games' buffer stores them: shaped, plus ``gamma`` x the step's value where it timed out.

    rl-games' ``play_steps`` with ``value_bootstrap`` (``train.value_bootstrap``, on unless a file turns it off): a
    step the simulator's time limit cut (``time_outs`` in its info) goes on through the critic instead of ending
    the return. The same ops in the same order as rl-games (``shaped + gamma * values * time_outs``, the product
    on the values' device), so the rows are rl-games' bit for bit. ``gamma`` None: value_bootstrap off.
    """
    if gamma is None or not isinstance(info, dict) or "time_outs" not in info:
        return shaped
    cut = as_tensor(info["time_outs"]).to(values.device).reshape(values.shape).float()
    return shaped + (gamma * values * cut).to(shaped.device).reshape(shaped.shape)


@dataclass(frozen=True)
class Play:
    """What rl-games' ``play_steps`` reads besides the policy: the agent GMIs step as tcg_ex's agent steps.

    ``value_bootstrap`` with ``gamma``: ``train.value_bootstrap`` (:func:`stepped_rewards`); ``zero_rnn_on_done``
    and ``epochs_between_resets``: the keys of ``train.rlgames_config`` (rl-games' defaults: zero a finished
    episode's recurrent states; never reset the environments).
    """

    gamma: float
    value_bootstrap: bool = True
    zero_rnn_on_done: bool = True
    epochs_between_resets: int = 0

    @classmethod
    def of(cls, train: TrainConfig) -> Play:
        extra = train.rlgames_config
        return cls(float(train.gamma), bool(train.value_bootstrap), bool(extra.get("zero_rnn_on_done", True)),
                   int(extra.get("epochs_between_resets", 0)))

    def resets(self, epoch: int) -> bool:
        """rl-games' ``set_eval``: every ``epochs_between_resets``-th epoch starts from reset environments."""
        return self.epochs_between_resets > 0 and epoch % self.epochs_between_resets == 0


class Collector:
    """One agent GMI's rollouts, staged on the host: ``horizon_length`` stepped records, then the bootstrap record.

    ``rollout`` fills :attr:`buf` (``(horizon_length + 1, n, ...)`` per field, what the channels carry) with the
    current weights of ``policy`` and leaves :attr:`obs` on the observation the next rollout acts on again.
    ``layout``: a recurrent policy's states (each record carries a piece of its chunk's start states). ``play``:
    what rl-games' ``play_steps`` does besides acting, done the same way, so the rows are the rollout rl-games'
    buffer would hold and every trainer (rl-games' agent, the learner, replay) trains on it.
    """

    def __init__(self, env: Any, n: int, policy: Policy, shape: DefaultRewardsShaper, fields: list[FieldSpec],
                 horizon: int, layout: StateLayout | None, device: torch.device, play: Play) -> None:
        self.env, self.n, self.policy, self.shape = env, n, policy, shape
        self.horizon, self.layout, self.device, self.play = horizon, layout, device, play
        self.bootstrap = play.gamma if play.value_bootstrap else None
        self.buf = {f.name: torch.zeros(horizon + 1, n, *f.shape, dtype=f.dtype) for f in fields}
        self.stats = EpisodeStats(n)
        self.rows = 0  # stepped rows so far (the ``seq`` of the next one)
        self.sim_s = self.inf_s = 0.0
        self.chunk: torch.Tensor | None = None
        self.obs = on_device(env.reset(), device)  # the simulator's dtype: frames stay uint8 on the channels

    def _stage(self, t: int, rec: dict[str, torch.Tensor]) -> None:
        for k, b in self.buf.items():  # the rollout is staged on the host, next to the channels
            b[t].copy_(rec[k].reshape(b[t].shape).to(b.device))

    def rollout(self, version: int, epoch: int) -> dict[str, torch.Tensor]:
        """Step ``horizon_length`` records with the policy's current weights (``version``), then the bootstrap record.

        ``epoch``: the iteration, counted as rl-games counts its epochs (the first is 1).
        """
        policy, layout, n = self.policy, self.layout, self.n
        if self.play.resets(epoch):  # rl-games' reset_envs and init_current_rewards
            self.obs = on_device(self.env.reset(), self.device)
            self.stats.restart()
            if policy.layout is not None:
                policy.states = policy.layout.zeros(n, self.obs.device)
        for t in range(self.horizon + 1):
            t0 = time.perf_counter()
            if layout is not None and t % layout.seq_length == 0:
                self.chunk = layout.flatten(policy.states)
            held = policy.states
            out = policy.act(self.obs)
            rec = {"obs": self.obs, **out, "seq": torch.arange(self.rows, self.rows + n),
                   "version": torch.full((n,), version)}
            if layout is not None:
                rec[layout.field.name] = layout.piece(self.chunk, t)
            if t == self.horizon:  # the bootstrap record: its value; the next rollout acts on it again
                policy.states = held  # its flag: the next rollout starts from reset environments (all episodes new)
                reset = int(self.play.resets(epoch + 1))
                rec.update(rewards=torch.zeros(n), dones=torch.full((n,), reset, dtype=torch.uint8))
                self._stage(t, rec)
                self.inf_s += time.perf_counter() - t0
                break
            t1 = time.perf_counter()
            nobs, rew, done, info = self.env.step(policy.env_actions(out["actions"]))
            t2 = time.perf_counter()
            rew, done = as_tensor(rew).float().cpu(), as_tensor(done).cpu()
            rec.update(rewards=stepped_rewards(self.shape(rew), out["values"], info, self.bootstrap),
                       dones=done.to(torch.uint8))
            if layout is not None and self.play.zero_rnn_on_done:
                policy.reset_done(done)
            self._stage(t, rec)
            self.rows += n
            self.stats.update(rew, done)
            self.obs = on_device(nobs, self.device)
            self.inf_s += t1 - t0
            self.sim_s += t2 - t1
        return self.buf


def open_routes(role: ExperienceSeat, owned: list[Any]) -> tuple[list[Route], Any]:
    """The agent's channels to its trainers and its first trainer's weight board, both added to ``owned``.

    The channels are made here, announced to the group and sealed once every GMI has attached.
    """
    plan, gmi = role.plan, role.ctx.gmi
    n = gmi.num_envs
    records = role.train_cfg.horizon_length + 1  # the stepped records and the bootstrap one
    routes, mine = [], {}
    for a, t in plan.channels:
        if a != gmi.id:
            continue
        cs = make_channel_set(role.channel.name, role.fields, rows_per_step=n,
                              target_bytes=role.channel.target_bytes, n_slots=role.channel.slots,
                              name=f"exp{a}to{t}", tag=role.tag, on_full=role.channel.on_full,
                              batch_rows=records * n)
        owned.append(cs)
        mine[links.route_key(a, t)] = cs
        routes.append(Route(t, plan.gmi(t).device, cs))
    handles = links.exchange(role.ctx.mgr, mine)
    board = links.attach(handles, links.board_key(routes[0].trainer))
    owned.append(board)
    links.barrier(role.ctx.mgr)
    for cs in mine.values():
        cs.seal()
    return routes, board


def serve(role: ExperienceSeat, owned: list[Any]) -> dict[str, Any]:
    """The serving GMI: collect rollouts with the newest published weights and dispense them to the trainers."""
    plan, gmi = role.plan, role.ctx.gmi
    horizon, n = role.train_cfg.horizon_length, gmi.num_envs
    routes, board = open_routes(role, owned)
    dispenser = Dispenser(role.fields, Migrator(routes, gmi.device))
    policy = Policy(role.model, role.spaces, n)
    col = Collector(make_env(role), n, policy, reward_shaper(plan.task), role.fields, horizon, role.states,
                    role.device, Play.of(role.train_cfg))
    stats, meter = col.stats, Meter(role)
    scratch = torch.empty(board.nbytes, dtype=torch.uint8)
    version = board.read(role.model, scratch) if board.wait(1, role.timeout, role.heartbeat) else 0
    sent = 0
    wait_s = 0.0
    lag_max = 0
    first = int(plan.resumed.get("epoch", 0)) + 1 if plan.resumed else 1  # a resumed run goes on from its epoch
    won = Path(plan.run_dir) / SCORE_FILE
    for it in range(first, plan.max_iterations + 1):
        if stop_requested() or won.exists():  # Ctrl-C/SIGTERM or the score: the trainers drain, then checkpoint
            break
        t0 = time.perf_counter()
        want = it - first + 1 if role.sync else 1  # sync: the update of the previous rollout must be in
        if board.wait(want, role.timeout, role.heartbeat) > version:
            version = board.read(role.model, scratch)
        wait_s += time.perf_counter() - t0
        lag_max = max(lag_max, board.version - version)
        buf = col.rollout(version, it)
        t0 = time.perf_counter()
        dispenser.dispense(buf)
        if role.sync:  # we wait for the update of this rollout: it must not sit in a Compressor
            dispenser.migrator.flush()
        wait_s += time.perf_counter() - t0
        sent += 1
        new = horizon * n
        meter.row(it, new, new, **{**stats.fields(), "async/policy_version": version,
                                  "async/lag": board.version - version, "time/sim_s": col.sim_s,
                                  "time/inference_s": col.inf_s, "time/comm_s": wait_s})
        if won_score(stats.mean(), plan.train.score_to_win):
            won.touch()  # every agent stops at its next iteration
    t0 = time.perf_counter()
    dispenser.close()
    wait_s += time.perf_counter() - t0
    return {"wall_s": meter.wall_s, "frames_local": meter.frames, "predictions": policy.predictions,
            "rows_sent": col.rows, "rollouts_sent": sent, "reward/mean": stats.mean(),
            "async/max_lag_seen": lag_max, "dropped_rows": sum(r.channels.dropped_rows for r in routes),
            "time/sim_s": col.sim_s, "time/inference_s": col.inf_s, "time/comm_s": wait_s}
