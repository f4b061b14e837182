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
"""

from __future__ import annotations

import time
from typing import Any

import torch

from gmiexp.comm.channels import Batcher, ChannelClosed, Dispenser, Migrator, Route, cleanup_run, make_channel_set
from gmiexp.rl import links
from gmiexp.rl.policy import EpisodeStats, Policy, build_model, experience_fields, probe_spaces
from gmiexp.rl.serving import Meter, as_tensor, make_env
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
        self.channel = plan.notes["channel"]
        self.acfg = plan.notes["async"]
        self.tag = self.ctx.mgr.run_tag
        self.timeout = float(self.acfg["drain_timeout_s"])
        self.spaces = probe_spaces(plan)
        self.fields = experience_fields(self.spaces, list(self.channel["fields"]))
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
        horizon, n = plan.train["horizon_length"], gmi.num_envs
        routes = []
        mine = {}
        for a, t in plan.channels:
            if a != gmi.id:
                continue
            cs = make_channel_set(self.channel["name"], self.fields, rows_per_step=n,
                                  target_bytes=self.channel["target_bytes"], n_slots=self.channel["slots"],
                                  name=f"exp{a}to{t}", tag=self.tag, on_full=self.channel["on_full"])
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
        obs = as_tensor(env.reset()).float()
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
                       "rewards": rew * plan.task["reward_scale"], "dones": done.to(torch.uint8),
                       "seq": torch.arange(rows, rows + n), "version": torch.full((n,), version)}
                for k, b in buf.items():
                    b[t].copy_(rec[k].reshape(b[t].shape))
                rows += n
                stats.update(rew, done)
                obs = as_tensor(nobs).float()
                inf_s += t1 - t0
                sim_s += t2 - t1
            t0 = time.perf_counter()
            dispenser.dispense(buf)
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
        horizon = plan.train["horizon_length"]
        batchers = {}
        for a in agents:
            cs = links.attach(handles, route_key(a, me))
            owned.append(cs)
            batchers[a] = Batcher([cs], horizon * plan.gmi(a).num_envs, zero_copy=self.channel["name"] == "multi")
        links.barrier(self.ctx.mgr)
        board.seal()
        update = make_update(self, self.sync)
        update.sync_initial_weights()
        board.publish(self.model)
        return TrainLoop(self, update, board, batchers).run()


class TrainLoop:
    """Rounds of: take rollouts, check them, update (collectively over the trainer group), publish."""

    def __init__(self, role: ExperienceRole, update: Update, board: WeightBoard,
                 batchers: dict[int, Batcher]) -> None:
        self.role, self.update, self.board, self.batchers = role, update, board, batchers
        self.plan = role.plan
        self.horizon = self.plan.train["horizon_length"]
        self.next_seq = dict.fromkeys(batchers, 0)
        self.open = set(batchers)
        self.seq_errors = 0
        self.rows_received = 0
        self.stale_rows = 0
        self.lags: list[int] = []
        self.order = list(batchers)
        self.rr = 0

    def check(self, agent: int, batch: dict[str, torch.Tensor]) -> None:
        """Rows must be exactly the agent's next ones (one-record overlap), in order."""
        n = self.plan.gmi(agent).num_envs
        seq = batch["seq"].reshape(self.horizon, n)
        base = self.next_seq[agent]
        want = base + torch.arange(self.horizon * n).reshape(self.horizon, n)
        if not torch.equal(seq, want):
            self.seq_errors += 1
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

    def run(self) -> dict[str, Any]:
        role, acfg = self.role, self.role.acfg
        meter = Meter(role)
        sync = role.sync
        k = 1 if sync else int(acfg["publish_every"])
        bound = int(acfg["max_policy_lag"])
        rounds = updates = trained = 0
        wait_s = 0.0
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
                    fresh.append((self.plan.gmi(a).num_envs, batch))
            done = not self.open
            n, total, all_done = self.update.step(fresh, done)
            rounds += 1
            if total > 0:
                updates += 1
                trained += n
                if updates % k == 0:
                    self.board.publish(role.model)
            if got or total:
                now = time.perf_counter()
                lag = max(self.lags[-len(got):]) if got else 0
                meter.row(updates, 0, 0, train_samples=n, **{
                    "async/train_samples_per_s": n / max(now - last, 1e-9), "async/lag": lag,
                    "async/policy_version": self.board.version, "loss/total": self.update.last_loss})
                last = now
            if all_done:
                break
        if updates % k:
            self.board.publish(role.model)
        return {"wall_s": meter.wall_s, "updates": updates, "rounds": rounds, "train_samples": trained,
                "rows_received": self.rows_received, "seq_errors": self.seq_errors,
                "stale_rows": self.stale_rows, "async/max_lag": max(self.lags, default=0),
                "async/mean_lag": sum(self.lags) / len(self.lags) if self.lags else 0.0,
                "weights_version": self.board.version, "time/train_s": self.update.train_s,
                "time/comm_s": self.update.comm_s, "time/wait_s": wait_s}


class TDGEXRole(ExperienceRole):
    """TDG_EX: synchronous; agents wait for the weights of each update (PPO on the trainers)."""

    sync = True


class A3CRole(ExperienceRole):
    """Decoupled async: agents never wait; trainers run advantage actor-critic (or PPO) on arrivals."""

    sync = False


__all__ = ["A3CRole", "ChannelClosed", "ExperienceRole", "TDGEXRole"]
