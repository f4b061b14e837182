"""The trainer loop of the experience layouts.

Take rollouts, check their order, update with the learner (collectively over the trainer group),
replay, publish weights.

With ``async_train.replay_ratio > 0`` every trainer also copies each rollout it trains into its own
:class:`~gmiexp.rl.experience.replay.ReplayStore` (an ExperienceStore) and, after every round in which
the group trained fresh rows, makes ``replay_ratio`` more collective updates on stored rollouts before
publishing weights.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from gmiexp.comm.channels import Batcher
from gmiexp.rl.experience import fed_update, links
from gmiexp.rl.experience.fed_update import FedUpdate
from gmiexp.rl.experience.meter import Meter
from gmiexp.rl.experience.replay import ReplayStore
from gmiexp.rl.experience.seat import ExperienceSeat
from gmiexp.rl.experience.weights import WeightBoard, state_nbytes
from gmiexp.rl.learner.update import Learner, make_optimiser
from gmiexp.rl.rlgames import checkpoint
from gmiexp.rl.state import model_digest
from gmiexp.shm.wait import Backoff

_TAKE = Backoff(spin=0, spin_s=0, min_sleep_s=1e-5, max_sleep_s=1e-3, check_s=0)  # trainers wait for rollouts

if TYPE_CHECKING:
    from gmiexp.plan import Plan


def minibatches(plan: Plan, sync: bool, minibatch_size: int, horizon: int) -> int:
    """Minibatches per round: the smallest trainer's rows of one round over ``train.minibatch_size``.

    Sync: one rollout of every agent; async: one rollout of the agent with the fewest environments.
    """
    per_trainer = []
    for t in plan.trainer_group:
        envs = [plan.gmi(a).num_envs for a, tt in plan.channels if tt == t]
        per_trainer.append((sum(envs) if sync else min(envs, default=1)) * horizon)
    return max(1, max(1, min(per_trainer)) // minibatch_size)


def planned_frames(plan: Plan, horizon: int) -> int:
    """Rows the trainer group trains in this run if nothing is dropped: every agent's rollouts."""
    agents = {a for a, _ in plan.channels}
    return sum(plan.max_iterations * horizon * plan.gmi(a).num_envs for a in agents)


def make_learner(role: ExperienceSeat) -> Learner | FedUpdate:
    """rl-games' own agent for TDG_EX with one trainer (:mod:`.fed_update`); else the learner.

    The learner runs PPO for TDG_EX with several trainers or replay, ``async_train.algo`` (ppo by default, as
    rl-games' files say; a2c for the paper's A3C) for decoupled async.
    """
    plan, tr = role.plan, role.train_cfg
    if fed_update.applies(role):
        me = role.gmi_id
        return FedUpdate(role, {a: plan.gmi(a).num_envs for a, t in plan.channels if t == me})
    return Learner(role.model, make_optimiser(role.model, tr), tr, role.allreduce,
                   ppo=role.sync or role.acfg.algo == "ppo",
                   num_minibatches=minibatches(plan, role.sync, tr.minibatch_size, tr.horizon_length),
                   world=len(plan.trainer_group), leader=role.gmi_id == min(plan.trainer_group),
                   rank=sorted(plan.trainer_group).index(role.gmi_id),
                   device=role.device, seed=plan.seed,  # the group's one permutation of its rows
                   max_frames=planned_frames(plan, tr.horizon_length), states=role.states)


def train(role: ExperienceSeat, owned: list[Any]) -> dict[str, Any]:
    """The trainer GMI: attach the agents' channels, publish the start weights, run the :class:`TrainLoop`."""
    plan, me = role.plan, role.gmi_id
    board = WeightBoard.create(f"weights{me}", state_nbytes(role.model), role.tag)
    owned.append(board)
    handles = links.exchange(role.ctx.mgr, {links.board_key(me): board})
    agents = [a for a, t in plan.channels if t == me]
    tr = role.train_cfg
    records = tr.horizon_length + 1  # a rollout: its steps and the bootstrap record
    batchers = {}
    # multi: batches are views into the rings (transfers are aligned with them, see gmiexp.rl.experience.agent_loop);
    # synchronous agents flush every rollout, so a view held past the publish blocks nobody
    zero_copy = role.channel.name == "multi"
    for a in agents:
        cs = links.attach(handles, links.route_key(a, me))
        owned.append(cs)
        batchers[a] = Batcher([cs], records * plan.gmi(a).num_envs, zero_copy=zero_copy)
    links.barrier(role.ctx.mgr)
    board.seal()
    replay = None
    if role.acfg.replay_ratio > 0:
        replay = ReplayStore(role.fields, records, max((plan.gmi(a).num_envs for a in agents), default=1),
                             int(role.channel.store_capacity), role.acfg.replay_selection,
                             role.acfg.replay_eviction, tr.gamma, tr.tau,
                             seed=plan.seed + 7919 * me, name=f"replay{me}", tag=role.tag)
        owned.append(replay)
    update = make_learner(role)
    if plan.checkpoint:  # every trainer loads it: weights, normalisers, Adam state, counters
        state = checkpoint.load(plan.checkpoint)
        checkpoint.restore(role.model, state, update.opt)
        update.restore_schedule(state)  # the adaptive rate goes on where it was, as one uninterrupted run's
        update.epoch0, update.frame0 = int(state.get("epoch", 0)), int(state.get("frame", 0))
    update.start_digest = model_digest(role.model)
    update.sync_initial_weights()
    board.publish(role.model)
    return TrainLoop(role, update, board, batchers, replay).run()


def spans(ids: list[int]) -> list[list[int]]:
    """Sorted ids as inclusive ``[first, last]`` runs (compact enough for result.json)."""
    out: list[list[int]] = []
    for i in sorted(ids):
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


@dataclass
class Tally:
    """What a trainer's rounds add up to (its summary's counts and times)."""

    rounds: int = 0
    updates: int = 0  #: rounds in which the group trained fresh rows
    trained: int = 0  #: fresh rows this trainer trained
    trained_all: int = 0  #: fresh rows the group trained
    replay_batches: int = 0
    replay_rows: int = 0
    wait_s: float = 0.0
    replay_s: float = 0.0


class TrainLoop:
    """Rounds of: take rollouts, check them, update (collectively over the trainer group), replay, publish."""

    def __init__(self, role: ExperienceSeat, update: Learner | FedUpdate, board: WeightBoard,
                 batchers: dict[int, Batcher], replay: ReplayStore | None = None) -> None:
        self.role, self.update, self.board, self.batchers = role, update, board, batchers
        self.replay = replay
        self.plan = role.plan
        self.records = self.plan.train.horizon_length + 1  # per rollout: the steps and the bootstrap record
        self.next_seq = dict.fromkeys(batchers, 0)
        # agents whose Migrator may send a rollout to another trainer: this one sees a subsequence
        self.shared = {a for a in batchers if sum(1 for aa, _ in self.plan.channels if aa == a) > 1}
        self.rollouts: dict[int, list[int]] = {a: [] for a in batchers}
        self.open = set(batchers)
        self.seq_errors = 0
        self.rows_received = 0
        self.stale_rows = 0
        self.lags: list[int] = []
        self.order = list(batchers)
        self.rr = 0
        self.tally = Tally()

    def check(self, agent: int, batch: dict[str, torch.Tensor]) -> None:
        """Rows must be one whole rollout of the agent (one-record overlap), later than its previous one.

        An agent routed to this trainer only must send every rollout here: the rollout must start
        exactly where the previous one ended. An agent routed to several trainers spreads its
        rollouts over them, so here it may skip whole rollouts (the run's ``rollouts`` spans of all
        trainers together must then cover each agent's rollouts exactly once).
        """
        n = self.plan.gmi(agent).num_envs
        seq = batch["seq"].reshape(self.records, n)
        base, stride = int(seq[0, 0]), (self.records - 1) * n
        want = base + torch.arange(self.records * n).reshape(self.records, n)
        expected = self.next_seq[agent]
        in_order = base >= expected and base % stride == 0 if agent in self.shared else base == expected
        if not (in_order and torch.equal(seq, want)):
            self.seq_errors += 1
        else:
            self.rollouts[agent].append(base // stride)
        self.next_seq[agent] = int(seq[-1, 0])

    def take(self, sync: bool) -> list[tuple[int, dict[str, torch.Tensor]]]:
        """Sync: one rollout from every open agent. Async: the next ready rollout (or none if patience ran out)."""
        got: list[tuple[int, dict[str, torch.Tensor]]] = []
        want = set(self.open) if sync else None

        def done() -> bool:  # poll every open agent while that makes progress
            progress = True
            while self.open and progress:
                progress = False
                for k in range(len(self.order)):
                    a = self.order[(self.rr + k) % len(self.order)]
                    if a not in self.open or (want is not None and a not in want):
                        continue
                    batch = self.batchers[a].try_batch()
                    if batch is not None:
                        got.append((a, batch))  # views stay valid until this Batcher's next call
                        progress = True
                        if want is None:
                            self.rr = (self.rr + k + 1) % len(self.order)
                            return True
                        want.discard(a)
                    elif self.batchers[a].exhausted:
                        self.open.discard(a)
                        if want is not None:
                            want.discard(a)
                if want is not None and not want:
                    return True
            return not self.open

        patience = None if sync or len(self.plan.trainer_group) == 1 else 0.05
        timeout = self.role.timeout if patience is None else min(patience, self.role.timeout)
        try:
            _TAKE.wait(done, timeout, check=lambda: self.role.heartbeat(stage="waiting for experience"))
        except TimeoutError:
            if patience is not None and patience <= self.role.timeout:
                return got
            raise TimeoutError(f"trainer GMI {self.role.gmi_id}: no experience for {self.role.timeout} s "
                               "(async_train.drain_timeout_s)") from None
        return got

    def iterations(self) -> int:
        """The agents' iterations in this attempt, over the trainer group: what the checkpoint's epoch adds.

        Agents resume at the checkpoint's epoch + 1 and number their history rows by iteration, so the epoch
        counts their rollouts, not this group's updates: an async trainer drops a stale rollout without an
        update and updates once per rollout of each of its agents (counting updates trained the boundary epoch
        of a re-shape or a requeue twice, or skipped epochs). An agent's rollouts so far are its last row
        number over the rollout stride (:meth:`check`); agents that stopped at different iterations count as
        the furthest, as the run rows do (``launch/live.RunRows``). Collective: every trainer calls it once.
        """
        group = self.plan.trainer_group
        mine = torch.zeros(len(group), dtype=torch.float64)
        mine[group.index(self.role.gmi_id)] = max(
            (seq // ((self.records - 1) * self.plan.gmi(a).num_envs) for a, seq in self.next_seq.items()), default=0)
        self.role.allreduce(mine)
        return int(mine.max().item())

    def replay_round(self, done: bool) -> tuple[int, int]:
        """``replay_ratio`` collective off-policy updates on stored rollouts; returns (my batches, my rows).

        Called by every trainer after every round in which any of them trained fresh rows, so the
        group makes the same collective calls; a trainer with nothing stored takes part with 0 rows.
        """
        ratio = self.role.acfg.replay_ratio
        per = len(self.batchers) if self.role.sync else 1  # a replayed batch is as large as a fresh one
        picked = self.replay.sample(ratio * per)
        batches = rows = 0
        for j in range(ratio):
            mine = [self.replay.refresh(self.role.model, r, self.role.device) for r in picked[j * per:(j + 1) * per]]
            n, _, _ = self.update.step(mine, done, off_policy=True)
            if n:
                batches += 1
                rows += n
        return batches, rows

    def periodic(self, updates: int) -> None:
        """After an update: ``train.check_sync`` (the trainer group's weights bit-identical) and ``save_frequency``.

        Collective when ``check_sync`` is on: every trainer updates in the same rounds (the learner's step is
        collective too). The periodic checkpoint is rl-games' format (:func:`gmiexp.rl.rlgames.checkpoint.save`),
        named as rl-games names its ``last_`` checkpoints, so any layout resumes it.
        """
        tr = self.plan.train
        if tr.check_sync:
            self.check_sync()
        freq = int(tr.save_frequency)
        if freq > 0 and updates % freq == 0 and self.role.gmi_id == min(self.plan.trainer_group):
            epoch = self.update.epoch0 + updates
            nn_dir = Path(self.plan.run_dir) / "rl_games" / "run" / "nn"
            checkpoint.save(nn_dir / f"last_{self.plan.task.name}_ep_{epoch}", self.role.model, self.update.opt,
                            epoch, self.update.frame0 + self.update.frames, self.update.schedule_state())

    def check_sync(self) -> None:
        """Raise unless every trainer holds bit-identical weights and normalisers (their digests agree)."""
        digest = model_digest(self.role.model)
        x = torch.tensor([float(int(digest[i:i + 6], 16)) for i in (0, 6)], dtype=torch.float64)  # < 2**24 each
        sums = torch.cat([x, x * x])
        self.role.allreduce(sums)
        g = len(self.plan.trainer_group)
        if not torch.equal(sums, torch.cat([x * g, x * x * g])):  # equal sums and squares: all equal
            raise RuntimeError(f"trainer GMI {self.role.gmi_id}: the trainers' weights diverged (digest {digest})")

    def admit(self, got: list[tuple[int, dict[str, torch.Tensor]]]) -> list[tuple[int, dict[str, torch.Tensor]]]:
        """The round's rollouts to train, in agent order (one rl-games batch of their environments).

        Each is checked (:meth:`check`) and its policy lag recorded; an async rollout older than
        ``async_train.max_policy_lag`` is dropped (counted in ``stale_rows``); the rest are copied to the replay
        store now (a zero-copy batch is gone at the next take).
        """
        fresh = []
        for a, batch in sorted(got, key=lambda x: x[0]):
            rows = int(batch["seq"].numel())
            self.rows_received += rows
            self.check(a, batch)
            lag = self.board.version - int(batch["version"].max())
            self.lags.append(lag)
            if lag > self.role.acfg.max_policy_lag and not self.role.sync:
                self.stale_rows += rows
                continue
            n_envs = self.plan.gmi(a).num_envs
            fresh.append((n_envs, batch))
            if self.replay is not None:
                self.replay.add(n_envs, batch)
        return fresh

    def run(self) -> dict[str, Any]:
        """Rounds until every agent is done; then the last weights, one checkpoint and the trainer's summary."""
        role = self.role
        meter = Meter(role)
        every = 1 if role.sync else role.acfg.publish_every  # updates between weight publications
        t = self.tally = Tally()
        last = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            got = self.take(role.sync)
            t.wait_s += time.perf_counter() - t0
            n, total, all_done = self.update.step(self.admit(got), not self.open)
            loss = self.update.last_loss  # the fresh rows' (replay rounds below move it)
            t.trained_all += total
            t.rounds += 1
            replayed = (0, 0)
            if total > 0:
                t.updates += 1
                t.trained += n
                replayed = self.replay_after(not self.open)
                if t.updates % every == 0:
                    self.board.publish(role.model)
                self.periodic(t.updates)
            elif got and role.sync:  # a round short of an agent that stopped: the others still wait for a version
                self.board.publish(role.model)
            if got or total:
                last = self.log_round(meter, got, n, loss, replayed, last)
            if all_done:
                break
        if t.updates % every:
            self.board.publish(role.model)
        return self.finish(meter)

    def replay_after(self, done: bool) -> tuple[int, int]:
        """The replay rounds after a round that trained fresh rows (none without a store); (batches, rows)."""
        if self.replay is None:
            return 0, 0
        t0 = time.perf_counter()
        rb, rr = self.replay_round(done)
        self.tally.replay_s += time.perf_counter() - t0
        self.tally.replay_batches += rb
        self.tally.replay_rows += rr
        return rb, rr

    def log_round(self, meter: Meter, got: list[Any], n: int, loss: float, replayed: tuple[int, int],
                  last: float) -> float:
        """The round's history row (rates, lag, version, loss, KL, rate, times); returns its time."""
        now = time.perf_counter()
        lag = max(self.lags[-len(got):]) if got else 0
        extra = {"replay/batches": replayed[0], "replay/rows": replayed[1]} if self.replay is not None else {}
        meter.row(self.tally.updates, 0, 0, train_samples=n, **{
            "async/train_samples_per_s": n / max(now - last, 1e-9), "async/lag": lag,
            "async/policy_version": self.board.version, "loss/total": loss,
            "train/kl": float(self.update.last_kl), "train/lr": float(self.update.lr),
            "time/train_s": self.update.train_s, "time/comm_s": self.update.comm_s, **extra})
        return now

    def finish(self, meter: Meter) -> dict[str, Any]:
        """One checkpoint per run (the group's first trainer, as GMI 0 does in tcg_ex) and this trainer's summary."""
        role, t = self.role, self.tally
        epoch, frame = self.update.epoch0 + self.iterations(), self.update.frame0 + t.trained_all
        saved = ""
        if role.gmi_id == min(self.plan.trainer_group):
            path = Path(self.plan.run_dir) / "rl_games" / "run" / "nn" / self.plan.task.name
            saved = str(checkpoint.save(path, role.model, self.update.opt, epoch, frame, self.update.schedule_state()))
        out = {"wall_s": meter.wall_s, "updates": t.updates, "rounds": t.rounds, "train_samples": t.trained,
               "rows_received": self.rows_received, "seq_errors": self.seq_errors,
               "rollouts": {str(a): spans(ids) for a, ids in self.rollouts.items()},
               "stale_rows": self.stale_rows, "async/max_lag": max(self.lags, default=0),
               "async/mean_lag": sum(self.lags) / len(self.lags) if self.lags else 0.0,
               "weights_version": self.board.version, "weights_digest": model_digest(role.model),
               "start_digest": self.update.start_digest, "resumed_epoch": self.update.epoch0, "epoch": epoch,
               "frame": frame, "checkpoint": saved,
               "time/train_s": self.update.train_s,
               "time/comm_s": self.update.comm_s, "time/wait_s": t.wait_s}
        if self.replay is not None:
            out.update({"replay/batches": t.replay_batches, "replay/rows": t.replay_rows, "replay/time_s": t.replay_s,
                        **self.replay.stats()})
        return out


__all__ = ["TrainLoop", "make_learner", "spans", "train"]
