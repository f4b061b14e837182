"""Experience-sharing training roles: TDG_EX (synchronous PPO) and decoupled async (A3C-style).

Serving GMIs (simulator + agent) collect rollouts of ``train.horizon_length`` records and hand
them to a :class:`~gmiexp.comm.channels.Dispenser` (per-field channels, Compressor, Migrator);
trainer GMIs read them through one :class:`~gmiexp.comm.channels.Batcher` per agent, update the
rl-games model, reduce gradients among themselves with the Plan's reduction and publish weights
through a :class:`~gmiexp.rl.weights.WeightBoard`.

Rollouts overlap by one record: the last record of a rollout (whose value bootstraps the returns)
is sent again as the first record of the next one, so every transition is trained exactly once.
Two fields ride along with the configured ones: ``seq`` (row number per agent, checked by the
trainer: nothing lost, duplicated or reordered) and ``version`` (the weights that produced the row,
for policy lag).

With ``async_train.replay_ratio > 0`` every trainer also copies each rollout it trains into its own
:class:`~gmiexp.rl.replay.ReplayStore` (an ExperienceStore) and, after every round in which the
group trained fresh rows, makes ``replay_ratio`` more collective updates on stored rollouts before
publishing weights.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from gmiexp.comm.channels import Batcher, ChannelClosed, Dispenser, Migrator, Route, cleanup_run, make_channel_set
from gmiexp.rl import checkpoint, links
from gmiexp.rl.agent import model_digest
from gmiexp.rl.policy import EpisodeStats, Policy, build_model, experience_fields, probe_spaces
from gmiexp.rl.replay import ReplayStore
from gmiexp.rl.serving import Meter, as_tensor, make_env, on_device
from gmiexp.rl.trainer import Update, make_update
from gmiexp.rl.weights import WeightBoard, state_nbytes
from gmiexp.role import Role


def board_key(trainer: int) -> str:
    return f"weights/{trainer}"


def route_key(agent: int, trainer: int) -> str:
    return f"exp/{agent}->{trainer}"


class ExperienceRole(Role):
    """Agent on serving GMIs, trainer on trainer GMIs; ``sync`` makes agents wait for each update."""

    sync = False

    def run(self) -> dict[str, Any]:
        plan = self.plan
        assert plan.channel is not None and plan.async_train is not None, "an experience layout sets both"
        self.channel = plan.channel
        self.acfg = plan.async_train
        self.tag = self.ctx.mgr.run_tag
        self.timeout = float(self.acfg.drain_timeout_s)
        self.spaces = probe_spaces(plan)
        self.fields = experience_fields(self.spaces, list(self.channel.fields))
        self.model = build_model(plan, self.ctx.gmi, self.spaces, self.device)
        owned: list[Any] = []
        try:
            if self.ctx.gmi.has("trainer"):
                return self._train(owned)
            return self._serve(owned)
        finally:
            for x in owned:
                x.close()
            cleanup_run(self.tag)

    # ---- serving GMI -----------------------------------------------------------------------
    def _serve(self, owned: list[Any]) -> dict[str, Any]:
        plan, gmi = self.plan, self.ctx.gmi
        horizon, n = plan.train.horizon_length, gmi.num_envs
        routes = []
        mine = {}
        for a, t in plan.channels:
            if a != gmi.id:
                continue
            cs = make_channel_set(self.channel.name, self.fields, rows_per_step=n,
                                  target_bytes=self.channel.target_bytes, n_slots=self.channel.slots,
                                  name=f"exp{a}to{t}", tag=self.tag, on_full=self.channel.on_full,
                                  batch_rows=horizon * n)
            owned.append(cs)
            mine[route_key(a, t)] = cs
            routes.append(Route(t, plan.gmi(t).device, cs))
        handles = links.exchange(self.ctx.mgr, mine)
        board = links.attach(handles, board_key(routes[0].trainer))
        owned.append(board)
        links.barrier(self.ctx.mgr)
        for cs in mine.values():
            cs.seal()
        dispenser = Dispenser(self.fields, Migrator(routes, gmi.device))
        env = make_env(self)
        policy = Policy(self.model, self.spaces)
        scratch = torch.empty(board.nbytes, dtype=torch.uint8)
        buf = {f.name: torch.zeros(horizon, n, *f.shape, dtype=f.dtype) for f in self.fields}
        stats, meter = EpisodeStats(n), Meter(self)
        obs = on_device(env.reset(), self.device).float()
        version = board.read(self.model, scratch) if board.wait(1, self.timeout, self.heartbeat) else 0
        rows, start = 0, 0
        sim_s = inf_s = wait_s = 0.0
        lag_max = 0
        for it in range(1, plan.max_iterations + 1):
            t0 = time.perf_counter()
            want = it if self.sync else 1  # sync: the update of the previous rollout must be in
            if board.wait(want, self.timeout, self.heartbeat) > version:
                version = board.read(self.model, scratch)
            wait_s += time.perf_counter() - t0
            lag_max = max(lag_max, board.version - version)
            for t in range(start, horizon):
                t0 = time.perf_counter()
                out = policy.act(obs)
                t1 = time.perf_counter()
                nobs, rew, done, _ = env.step(policy.env_actions(out["actions"]))
                t2 = time.perf_counter()
                rew, done = as_tensor(rew).float().cpu(), as_tensor(done).cpu()
                rec = {"obs": obs, "actions": out["actions"], "values": out["values"], "neglogp": out["neglogp"],
                       "rewards": rew * plan.task.reward_scale, "dones": done.to(torch.uint8),
                       "seq": torch.arange(rows, rows + n), "version": torch.full((n,), version)}
                for k, b in buf.items():  # the rollout is staged on the host, next to the channels
                    b[t].copy_(rec[k].reshape(b[t].shape).to(b.device))
                rows += n
                stats.update(rew, done)
                obs = on_device(nobs, self.device).float()
                inf_s += t1 - t0
                sim_s += t2 - t1
            t0 = time.perf_counter()
            dispenser.dispense(buf)
            if self.sync:  # we wait for the update of this rollout: it must not sit in a Compressor
                dispenser.migrator.flush()
            for b in buf.values():  # the bootstrap record opens the next rollout
                b[0].copy_(b[horizon - 1])
            wait_s += time.perf_counter() - t0
            new = (horizon - start) * n
            start = 1
            meter.row(it, new, new, **{"reward/mean": stats.mean(), "async/policy_version": version,
                                      "async/lag": board.version - version})
        t0 = time.perf_counter()
        dispenser.close()
        wait_s += time.perf_counter() - t0
        return {"wall_s": meter.wall_s, "frames_local": meter.frames, "predictions": policy.predictions,
                "rows_sent": rows, "rollouts_sent": plan.max_iterations, "reward/mean": stats.mean(),
                "async/max_lag_seen": lag_max, "dropped_rows": sum(r.channels.dropped_rows for r in routes),
                "time/sim_s": sim_s, "time/inference_s": inf_s, "time/comm_s": wait_s}

    # ---- trainer GMI -----------------------------------------------------------------------
    def _train(self, owned: list[Any]) -> dict[str, Any]:
        plan, me = self.plan, self.gmi_id
        board = WeightBoard.create(f"weights{me}", state_nbytes(self.model), self.tag)
        owned.append(board)
        handles = links.exchange(self.ctx.mgr, {board_key(me): board})
        agents = [a for a, t in plan.channels if t == me]
        horizon = plan.train.horizon_length
        batchers = {}
        # multi: batches are views into the rings (transfers are aligned with them, see _serve);
        # synchronous agents flush every rollout, so a view held past the publish blocks nobody
        zero_copy = self.channel.name == "multi"
        for a in agents:
            cs = links.attach(handles, route_key(a, me))
            owned.append(cs)
            batchers[a] = Batcher([cs], horizon * plan.gmi(a).num_envs, zero_copy=zero_copy)
        links.barrier(self.ctx.mgr)
        board.seal()
        replay = None
        if int(self.acfg.replay_ratio) > 0:
            replay = ReplayStore(self.fields, horizon, max((plan.gmi(a).num_envs for a in agents), default=1),
                                 int(self.channel.store_capacity), self.acfg.replay_selection,
                                 self.acfg.replay_eviction, plan.train.gamma, plan.train.tau,
                                 seed=plan.seed + 7919 * me, name=f"replay{me}", tag=self.tag)
            owned.append(replay)
        update = make_update(self, self.sync)
        if plan.checkpoint:  # every trainer loads it: weights, normalisers, Adam state, counters
            state = checkpoint.load(plan.checkpoint)
            checkpoint.restore(self.model, state, update.opt, lr=plan.train.learning_rate)
            update.epoch0, update.frame0 = int(state.get("epoch", 0)), int(state.get("frame", 0))
        update.start_digest = model_digest(self.model)
        update.sync_initial_weights()
        board.publish(self.model)
        return TrainLoop(self, update, board, batchers, replay).run()


def spans(ids: list[int]) -> list[list[int]]:
    """Sorted ids as inclusive ``[first, last]`` runs (compact enough for result.json)."""
    out: list[list[int]] = []
    for i in sorted(ids):
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


class TrainLoop:
    """Rounds of: take rollouts, check them, update (collectively over the trainer group), replay, publish."""

    def __init__(self, role: ExperienceRole, update: Update, board: WeightBoard,
                 batchers: dict[int, Batcher], replay: ReplayStore | None = None) -> None:
        self.role, self.update, self.board, self.batchers = role, update, board, batchers
        self.replay = replay
        self.plan = role.plan
        self.horizon = self.plan.train.horizon_length
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

    def check(self, agent: int, batch: dict[str, torch.Tensor]) -> None:
        """Rows must be one whole rollout of the agent (one-record overlap), later than its previous one.

        An agent routed to this trainer only must send every rollout here: the rollout must start
        exactly where the previous one ended. An agent routed to several trainers spreads its
        rollouts over them, so here it may skip whole rollouts (the run's ``rollouts`` spans of all
        trainers together must then cover each agent's rollouts exactly once).
        """
        n = self.plan.gmi(agent).num_envs
        seq = batch["seq"].reshape(self.horizon, n)
        base, stride = int(seq[0, 0]), (self.horizon - 1) * n
        want = base + torch.arange(self.horizon * n).reshape(self.horizon, n)
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
        start = time.monotonic()
        patience = None if sync or len(self.plan.trainer_group) == 1 else 0.05
        sleep = 1e-5
        while self.open:
            progress = False
            for k in range(len(self.order)):
                a = self.order[(self.rr + k) % len(self.order)]
                if a not in self.open or (want is not None and a not in want):
                    continue
                batch = self.batchers[a].try_batch()
                if batch is not None:
                    got.append((a, batch))  # views stay valid until this Batcher's next call
                    progress = True
                    if want is not None:
                        want.discard(a)
                    else:
                        self.rr = (self.rr + k + 1) % len(self.order)
                        return got
                elif self.batchers[a].exhausted:
                    self.open.discard(a)
                    if want is not None:
                        want.discard(a)
            if want is not None and not want:
                return got
            if progress:
                continue
            waited = time.monotonic() - start
            if patience is not None and waited > patience:
                return got
            if waited > self.role.timeout:
                raise TimeoutError(f"trainer GMI {self.role.gmi_id}: no experience for {self.role.timeout} s "
                                   "(async_train.drain_timeout_s)")
            self.role.heartbeat(stage="waiting for experience")
            time.sleep(sleep)
            sleep = min(sleep * 2, 1e-3)
        return got

    def replay_round(self, done: bool) -> tuple[int, int]:
        """``replay_ratio`` collective off-policy updates on stored rollouts; returns (my batches, my rows).

        Called by every trainer after every round in which any of them trained fresh rows, so the
        group makes the same collective calls; a trainer with nothing stored takes part with 0 rows.
        """
        ratio = int(self.role.acfg.replay_ratio)
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

    def run(self) -> dict[str, Any]:
        role, acfg = self.role, self.role.acfg
        meter = Meter(role)
        sync = role.sync
        k = 1 if sync else int(acfg.publish_every)
        bound = int(acfg.max_policy_lag)
        rounds = updates = trained = trained_all = 0
        replay_batches = replay_rows = 0
        wait_s = replay_s = 0.0
        last = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            got = self.take(sync)
            wait_s += time.perf_counter() - t0
            fresh = []
            for a, batch in got:
                rows = int(batch["seq"].numel())
                self.rows_received += rows
                self.check(a, batch)
                lag = self.board.version - int(batch["version"].max())  # record 0 is the older bootstrap
                self.lags.append(lag)
                if lag > bound and not sync:
                    self.stale_rows += rows
                else:
                    n_envs = self.plan.gmi(a).num_envs
                    fresh.append((n_envs, batch))
                    if self.replay is not None:  # copy now: a zero-copy batch is gone at the next take
                        self.replay.add(n_envs, batch)
            done = not self.open
            n, total, all_done = self.update.step(fresh, done)
            trained_all += total
            loss = self.update.last_loss
            rounds += 1
            rb = rr = 0
            if total > 0:
                updates += 1
                trained += n
                if self.replay is not None:
                    t0 = time.perf_counter()
                    rb, rr = self.replay_round(done)
                    replay_s += time.perf_counter() - t0
                    replay_batches += rb
                    replay_rows += rr
                if updates % k == 0:
                    self.board.publish(role.model)
            if got or total:
                now = time.perf_counter()
                lag = max(self.lags[-len(got):]) if got else 0
                extra = {"replay/batches": rb, "replay/rows": rr} if self.replay is not None else {}
                meter.row(updates, 0, 0, train_samples=n, **{
                    "async/train_samples_per_s": n / max(now - last, 1e-9), "async/lag": lag,
                    "async/policy_version": self.board.version, "loss/total": loss, **extra})
                last = now
            if all_done:
                break
        if updates % k:
            self.board.publish(role.model)
        epoch, frame = self.update.epoch0 + updates, self.update.frame0 + trained_all
        saved = ""
        if role.gmi_id == min(self.plan.trainer_group):  # one checkpoint per run, as GMI 0 does in tcg_ex
            path = Path(self.plan.run_dir) / "rl_games" / "run" / "nn" / self.plan.task.name
            saved = str(checkpoint.save(path, role.model, self.update.opt, epoch, frame))
        out = {"wall_s": meter.wall_s, "updates": updates, "rounds": rounds, "train_samples": trained,
               "rows_received": self.rows_received, "seq_errors": self.seq_errors,
               "rollouts": {str(a): spans(ids) for a, ids in self.rollouts.items()},
               "stale_rows": self.stale_rows, "async/max_lag": max(self.lags, default=0),
               "async/mean_lag": sum(self.lags) / len(self.lags) if self.lags else 0.0,
               "weights_version": self.board.version, "weights_digest": model_digest(role.model),
               "start_digest": self.update.start_digest, "resumed_epoch": self.update.epoch0, "epoch": epoch,
               "frame": frame, "checkpoint": saved,
               "time/train_s": self.update.train_s,
               "time/comm_s": self.update.comm_s, "time/wait_s": wait_s}
        if self.replay is not None:
            out.update({"replay/batches": replay_batches, "replay/rows": replay_rows, "replay/time_s": replay_s,
                        **self.replay.stats()})
        return out


class TDGEXRole(ExperienceRole):
    """TDG_EX: synchronous; agents wait for the weights of each update (PPO on the trainers)."""

    sync = True


class A3CRole(ExperienceRole):
    """Decoupled async: agents never wait; trainers run advantage actor-critic (or PPO) on arrivals."""

    sync = False


__all__ = ["A3CRole", "ChannelClosed", "ExperienceRole", "TDGEXRole"]
