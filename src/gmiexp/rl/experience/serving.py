"""Serving-only roles: TCG (simulator + agent in one GMI) and TDG (simulator and agent GMIs).

Both collect experience with a fixed (initial) policy and report predictions per second
(``async/predictions_per_s``, PPS): one prediction is one environment's action. An iteration is
``train.horizon_length`` steps of every environment.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from gmiexp.comm.channels import SlotRing
from gmiexp.rl.experience import links
from gmiexp.rl.experience.env import as_tensor, make_env, on_device
from gmiexp.rl.experience.meter import Meter
from gmiexp.rl.rlgames import checkpoint
from gmiexp.rl.rlgames.policy import EpisodeStats, Policy, Spaces, build_model, probe_spaces
from gmiexp.role import Role
from gmiexp.shm.cleanup import cleanup_run
from gmiexp.signals import stop_requested


def serving_model(role: Role, spaces: Spaces) -> torch.nn.Module:
    """The policy a serving GMI runs: the initial one, or the weights of ``checkpoint=``."""
    model = build_model(role.plan, role.ctx.gmi, spaces, role.device)
    if role.plan.checkpoint:
        checkpoint.restore(model, checkpoint.load(role.plan.checkpoint))
    return model


class ServeRole(Role):
    """TCG: step the simulator, predict actions in the same GMI; no data crosses a GMI boundary."""

    stops_gracefully = True

    def run(self) -> dict[str, Any]:
        plan, gmi = self.plan, self.ctx.gmi
        env = make_env(self)
        spaces = Spaces.of(env.get_env_info())
        policy = Policy(serving_model(self, spaces), spaces, gmi.num_envs)
        stats, meter = EpisodeStats(gmi.num_envs), Meter(self)
        sim_s = inf_s = 0.0
        obs = on_device(env.reset(), self.device)
        for it in range(1, plan.max_iterations + 1):
            if stop_requested():  # Ctrl-C/SIGTERM: stop after the iteration
                break
            for _ in range(plan.train.horizon_length):
                t0 = time.perf_counter()
                out = policy.act(obs)
                t1 = time.perf_counter()
                obs, rew, done, _ = env.step(policy.env_actions(out["actions"]))
                obs = on_device(obs, self.device)
                sim_s += time.perf_counter() - t1
                inf_s += t1 - t0
                stats.update(as_tensor(rew), as_tensor(done))
                policy.reset_done(as_tensor(done))
            n = plan.train.horizon_length * gmi.num_envs
            meter.row(it, n, n, **{**stats.fields(), "time/sim_s": sim_s, "time/inference_s": inf_s})
        return {"wall_s": meter.wall_s, "frames_local": meter.frames, "predictions": policy.predictions,
                "reward/mean": stats.mean(), "time/sim_s": sim_s, "time/inference_s": inf_s}


class TDGRole(Role):
    """TDG: a simulator GMI and an agent GMI exchange states and actions through shared memory every step."""

    def run(self) -> dict[str, Any]:
        plan, me = self.plan, self.gmi_id
        pair = next(p for p in plan.channels if me in p)
        agent, sim = pair
        tag = self.ctx.mgr.run_tag
        timeout = float(plan.launch.heartbeat_timeout_s)
        spaces = probe_spaces(plan)
        n = plan.gmi(sim).num_envs
        width = spaces.obs_shape[0] + 2  # obs | reward | done, one float32 row per environment
        act_bytes = n * spaces.action_field.row_bytes
        mine: dict[str, Any] = {}
        if me == sim:
            mine[f"tdg/state/{sim}"] = SlotRing.create(f"tdg-state{sim}", 2, n * width * 4, tag)
        else:
            mine[f"tdg/action/{agent}"] = SlotRing.create(f"tdg-action{agent}", 2, act_bytes, tag)
        rings: dict[str, SlotRing] = {}
        try:
            handles = links.exchange(self.ctx.mgr, mine)
            peer_key = f"tdg/action/{agent}" if me == sim else f"tdg/state/{sim}"
            rings = {**mine, "peer": links.attach(handles, peer_key)}
            links.barrier(self.ctx.mgr)
            for r in rings.values():
                r.seal()
            if me == sim:
                return self._simulate(rings[f"tdg/state/{sim}"], rings["peer"], spaces, timeout)
            return self._predict(rings["peer"], rings[f"tdg/action/{agent}"], spaces, n, timeout)
        finally:
            for r in rings.values() or mine.values():
                r.close()
            cleanup_run(tag)

    def _simulate(self, state: SlotRing, action: SlotRing, spaces: Spaces, timeout: float) -> dict[str, Any]:
        plan, gmi = self.plan, self.ctx.gmi
        env = make_env(self)
        stats, meter = EpisodeStats(gmi.num_envs), Meter(self)
        obs = as_tensor(env.reset()).float()
        rew = torch.zeros(gmi.num_envs)
        done = torch.zeros(gmi.num_envs)
        sim_s = wait_s = 0.0
        for it in range(1, plan.max_iterations + 1):
            for _ in range(plan.train.horizon_length):
                state.put(torch.cat([obs.reshape(gmi.num_envs, -1).cpu(), rew.reshape(-1, 1).float(),
                                     done.reshape(-1, 1).float()], dim=1), timeout=timeout)
                t0 = time.perf_counter()
                act = action.recv_copy(timeout=timeout).data
                t1 = time.perf_counter()
                obs, rew, done, _ = env.step(act.to(self.device))
                obs, rew, done = as_tensor(obs).float(), as_tensor(rew).cpu(), as_tensor(done).cpu()
                sim_s += time.perf_counter() - t1
                wait_s += t1 - t0
                stats.update(rew, done)
            meter.row(it, plan.train.horizon_length * gmi.num_envs, 0, **stats.fields())
        state.close_writer()
        return {"wall_s": meter.wall_s, "frames_local": meter.frames, "reward/mean": stats.mean(),
                "time/sim_s": sim_s, "time/comm_s": wait_s}

    def _predict(self, state: SlotRing, action: SlotRing, spaces: Spaces, n: int, timeout: float) -> dict[str, Any]:
        plan = self.plan
        policy = Policy(serving_model(self, spaces), spaces, n)
        meter, obs_dim = Meter(self), spaces.obs_shape[0]
        inf_s = wait_s = 0.0
        for it in range(1, plan.max_iterations + 1):
            for _ in range(plan.train.horizon_length):
                t0 = time.perf_counter()
                item = state.recv(timeout=timeout)
                t1 = time.perf_counter()
                policy.reset_done(item.data[:, obs_dim + 1])  # the step that produced these states ended them
                out = policy.act(item.data[:, :obs_dim].to(self.device))
                state.release()
                inf_s += time.perf_counter() - t1
                wait_s += t1 - t0
                action.put(policy.env_actions(out["actions"]).cpu(), timeout=timeout)
            meter.row(it, 0, plan.train.horizon_length * n)
        action.close_writer()
        return {"wall_s": meter.wall_s, "predictions": policy.predictions, "time/inference_s": inf_s,
                "time/comm_s": wait_s}
