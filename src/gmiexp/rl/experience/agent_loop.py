"""The agent loop of the experience layouts.

A serving GMI steps its simulator with the newest weights and sends each rollout to the trainers:
``train.horizon_length`` stepped records, all of them trained (as rl-games counts its horizon), and one
bootstrap record after them (the observation the next rollout starts from, with its value: rl-games'
``last_values``). The bootstrap record is not stepped: the next rollout acts on the same observation again
with the weights of its own iteration, so every trained action comes from the policy of its rollout.

``train.score_to_win`` stops the run as in rl-games: the first agent whose mean return over its last 100
episodes passes it writes :data:`SCORE_FILE` in the run dir, and every agent stops at its next iteration (the
trainers then drain and checkpoint, as after a Ctrl-C). One node's agents share it (each node has its run dir).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from rl_games.common.tr_helpers import DefaultRewardsShaper

from gmiexp.comm.channels import Dispenser, Migrator, Route, make_channel_set
from gmiexp.rl.experience import links
from gmiexp.rl.experience.env import as_tensor, make_env, on_device
from gmiexp.rl.experience.meter import Meter
from gmiexp.rl.experience.seat import ExperienceSeat
from gmiexp.rl.rlgames.policy import EpisodeStats, Policy
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


def serve(role: ExperienceSeat, owned: list[Any]) -> dict[str, Any]:
    """The serving GMI: collect rollouts with the newest published weights and dispense them to the trainers."""
    plan, gmi = role.plan, role.ctx.gmi
    horizon, n = role.train_cfg.horizon_length, gmi.num_envs
    records = horizon + 1  # the stepped records and the bootstrap one
    routes = []
    mine = {}
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
    dispenser = Dispenser(role.fields, Migrator(routes, gmi.device))
    env = make_env(role)
    shape = reward_shaper(plan.task)
    policy = Policy(role.model, role.spaces, n)
    layout = role.states  # a recurrent policy: each row carries a piece of its chunk's start states
    chunk = None
    scratch = torch.empty(board.nbytes, dtype=torch.uint8)
    buf = {f.name: torch.zeros(records, n, *f.shape, dtype=f.dtype) for f in role.fields}
    stats, meter = EpisodeStats(n), Meter(role)
    obs = on_device(env.reset(), role.device)  # the simulator's dtype: frames stay uint8 on the channels
    version = board.read(role.model, scratch) if board.wait(1, role.timeout, role.heartbeat) else 0
    rows, sent = 0, 0
    sim_s = inf_s = wait_s = 0.0
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
        for t in range(records):
            t0 = time.perf_counter()
            if layout is not None and t % layout.seq_length == 0:
                chunk = layout.flatten(policy.states)
            held = policy.states
            out = policy.act(obs)
            rec = {"obs": obs, **out, "seq": torch.arange(rows, rows + n), "version": torch.full((n,), version)}
            if layout is not None:
                rec[layout.field.name] = layout.piece(chunk, t)
            if t == horizon:  # the bootstrap record: its value; the next rollout acts on it again
                policy.states = held
                rec.update(rewards=torch.zeros(n), dones=torch.zeros(n, dtype=torch.uint8))
                for k, b in buf.items():
                    b[t].copy_(rec[k].reshape(b[t].shape).to(b.device))
                inf_s += time.perf_counter() - t0
                break
            t1 = time.perf_counter()
            nobs, rew, done, _ = env.step(policy.env_actions(out["actions"]))
            t2 = time.perf_counter()
            rew, done = as_tensor(rew).float().cpu(), as_tensor(done).cpu()
            rec.update(rewards=shape(rew), dones=done.to(torch.uint8))
            if layout is not None:
                policy.reset_done(done)
            for k, b in buf.items():  # the rollout is staged on the host, next to the channels
                b[t].copy_(rec[k].reshape(b[t].shape).to(b.device))
            rows += n
            stats.update(rew, done)
            obs = on_device(nobs, role.device)
            inf_s += t1 - t0
            sim_s += t2 - t1
        t0 = time.perf_counter()
        dispenser.dispense(buf)
        if role.sync:  # we wait for the update of this rollout: it must not sit in a Compressor
            dispenser.migrator.flush()
        wait_s += time.perf_counter() - t0
        sent += 1
        new = horizon * n
        meter.row(it, new, new, **{**stats.fields(), "async/policy_version": version,
                                  "async/lag": board.version - version, "time/sim_s": sim_s,
                                  "time/inference_s": inf_s, "time/comm_s": wait_s})
        if won_score(stats.mean(), plan.train.score_to_win):
            won.touch()  # every agent stops at its next iteration
    t0 = time.perf_counter()
    dispenser.close()
    wait_s += time.perf_counter() - t0
    return {"wall_s": meter.wall_s, "frames_local": meter.frames, "predictions": policy.predictions,
            "rows_sent": rows, "rollouts_sent": sent, "reward/mean": stats.mean(),
            "async/max_lag_seen": lag_max, "dropped_rows": sum(r.channels.dropped_rows for r in routes),
            "time/sim_s": sim_s, "time/inference_s": inf_s, "time/comm_s": wait_s}
