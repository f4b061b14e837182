"""A start on another partition (a re-shape) goes on with what it can of the run its checkpoint holds.

:func:`gmiexp.rl.rlgames.runstate.resume` gives every GMI of a start on the checkpoint's own partition its record
back. On another partition (``gmis_per_gpu`` 1 <-> 2 at the same global batch) no record is a new GMI's own; before,
none was used: every GMI drew a fresh start's streams again and every episode in progress was cut. Now:

* **generators**: new GMI ``r`` goes on with old GMI ``r``'s streams where the old partition had a GMI ``r``; a GMI
  beyond them keeps the streams its process was seeded with, its segment's (``gmi.seed``,
  :func:`gmiexp.planner.seeds.process_seed`), which no earlier segment drew;
* **environments**: the records name the environments of one process each GMI stepped
  (:func:`~gmiexp.rl.rlgames.runstate.global_envs`, the correspondence of docs/equivalence.md), so each new GMI
  takes its environments' rows from whichever old GMI held them: the simulator's per-environment state (the vec
  env's ``env_state_rows``: the torch cart-pole's states and step counters; its generator stays the new
  simulator's, seeded for the segment) and the agent's running episodes (observations, dones, running sums,
  recurrent state). Where the state does not split per environment (envpool saves none), the episodes in progress
  are cut, counted (episodes and frames) and said once;
* **weights, normalisers, Adam, epoch and frame counters, learning rate and entropy coefficient**: rl-games'
  restore and gmiexp's schedule (``set_full_state_weights``) on any partition. The report names what each GMI goes
  on from (:func:`going_on`), so a test holds them against the checkpoint.

A GMI's own episode window (``gmi/<id>/reward/mean``) starts empty: its environments are others now.
"""

from __future__ import annotations

from typing import Any

import torch

from gmiexp.rl.rlgames import runstate
from gmiexp.rl.rlgames.checkpoint import schedule_state
from gmiexp.rl.rlgames.runstate import cuts, global_envs, restore_episodes
from gmiexp.rl.state import Mismatch, model_digest, own_record, set_generator_states

#: where a running-episode tensor keeps its environments when not in its first dimension (rl-games' recurrent
#: state: layers x environments x units)
ENV_DIM = {"rnn_states": 1}


def resume(agent: Any, run: dict[str, Any] | None, rank: int, world_size: int, seed: int) -> dict[str, Any]:
    """Give this GMI what it can of the run, on the checkpoint's partition or another; ``seed``: its process's.

    The report: :func:`gmiexp.rl.rlgames.runstate.resume`'s; on another partition also ``reshaped`` (``from`` and
    ``to`` GMIs) and ``streams`` (whose generators the GMI goes on with); and :func:`going_on`.
    """
    records = (run or {}).get("gmis") or []
    if run is None or not records or own_record(run, rank, world_size) is not None:
        report = runstate.resume(agent, run, rank, world_size)
    else:
        report = _reshaped(agent, records, rank, world_size, seed)
    return {**report, **going_on(agent)}


def _reshaped(agent: Any, records: list[dict[str, Any]], rank: int, world_size: int, seed: int) -> dict[str, Any]:
    report: dict[str, Any] = {"reshaped": {"from": len(records), "to": int(world_size)}, "restored": False,
                              "simulator": False}
    try:
        report["simulator"] = restore_episodes(agent, carried(agent, records))
    except Mismatch:
        pass  # cut and counted below
    if rank < len(records):  # last: nothing draws before the first epoch
        set_generator_states(records[rank]["generators"], agent.ppo_device)
        report["restored"] = True
    report["streams"] = f"GMI {rank}'s" if report["restored"] else f"seed {seed}"
    # every GMI of a start carries alike (the same simulator), so each one's count is the run's
    report.update(cuts(records, report["simulator"]))
    return report


def carried(agent: Any, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The agent GMI's record, made of the old GMIs' rows of its environments (for ``restore_episodes``).

    Raises Mismatch where that cannot be: a simulator whose state does not split per environment, records without
    their simulator's state or environments (an older gmiexp's), environments no record holds.
    """
    env = getattr(agent, "vec_env", None)
    rows = getattr(env, "env_state_rows", None)
    fresh = env.get_env_state() if env is not None else None
    if rows is None or fresh is None:
        raise Mismatch("the simulator's state does not split per environment")
    if any(r.get("env") is None or r.get("envs") is None for r in records):
        raise Mismatch("a record without its simulator's state or its environments")
    where = locate(records, global_envs(agent))
    try:
        episodes = {name: take(where, [r["episodes"][name] for r in records], ENV_DIM.get(name, 0))
                    for name in records[0]["episodes"]}
        state = {**fresh, **{key: take(where, [r["env"][key] for r in records], 0) for key in rows}}
    except (KeyError, IndexError, RuntimeError) as e:  # records unlike one another
        raise Mismatch(f"records of other shapes: {e}") from e
    return {"env": state, "episodes": episodes}


def locate(records: list[dict[str, Any]], envs: list[int]) -> list[tuple[int, int]]:
    """For each environment of ``envs`` (one process's numbering), the old GMI that held it and its row there."""
    at = {g: (i, k) for i, r in enumerate(records) for k, g in enumerate(r["envs"])}
    missing = [g for g in envs if g not in at]
    if missing:
        raise Mismatch(f"{len(missing)} environments in no record (first {missing[0]})")
    return [at[g] for g in envs]


def take(where: list[tuple[int, int]], parts: list[Any], dim: int) -> Any:
    """The rows ``where`` names (old GMI, row) of the old GMIs' ``parts``, stacked along ``dim``, nested alike."""
    first = parts[0]
    if torch.is_tensor(first):
        return torch.stack([parts[i].select(dim, k) for i, k in where], dim)
    if isinstance(first, dict):
        return {key: take(where, [p[key] for p in parts], dim) for key in first}
    if isinstance(first, list | tuple):
        return type(first)(take(where, [p[j] for p in parts], dim) for j in range(len(first)))
    return first


def going_on(agent: Any) -> dict[str, Any]:
    """What the GMI trains on from: epoch, frame, its model's digest (weights and normalisers), its schedule."""
    models = [agent.model] + ([agent.central_value_net.model] if getattr(agent, "has_central_value", False) else [])
    return {"epoch": int(agent.epoch_num), "frame": int(agent.frame), "model": model_digest(*models),
            "schedule": schedule_state(agent)}


def resume_line(report: dict[str, Any], epoch: int, segment: int) -> str:
    """What GMI 0 says once at a resume (:func:`gmiexp.rl.rlgames.runstate.resume_line` on the same partition)."""
    moved = report.get("reshaped")
    if not moved:
        return runstate.resume_line(report, epoch, segment)
    head = (f"gmiexp: resumed after epoch {epoch} (segment {segment}) on another partition ({moved['from']} -> "
            f"{moved['to']} GMIs): ")
    if report["simulator"]:
        return head + "generators, simulator and running episodes carried over: no episode cut"
    return head + ("generators carried over, but the simulator cannot save its state per environment; "
                   + runstate.cut_said(report, segment))
