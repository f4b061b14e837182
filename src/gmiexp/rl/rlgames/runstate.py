"""What a checkpoint holds of a run beside its model: every GMI's generators, simulator and running episodes.

rl-games 1.6.5 saves the model, normalisers, optimiser and counters. A start from its checkpoint seeds torch, numpy
and random again from ``params.seed``, resets every environment and begins every episode again: a tcg_ex run
stopped at epoch 10 and resumed to 20 replayed its first epoch's streams, and 12 of its 14 weight tensors ended
unlike the run never stopped. gmiexp's GMI agents add :data:`~gmiexp.rl.rlgames.checkpoint.RUN_KEY`:

* ``segment``: the segment of the run that wrote it (:mod:`gmiexp.planner.seeds`);
* ``world_size`` and ``gmis``, one record per GMI in rank order (:func:`gmi_record`): its generators (torch's CPU
  generator, numpy's, random's, its device's where it has one), its simulator's state where the simulator saves
  one (rl-games' ``vec_env.get_env_state()``: the torch cart-pole's state tensors and generator; None for
  envpool), the agent's current observations, dones, running episode sums (``current_rewards``,
  ``current_lengths``, ``current_shaped_rewards``) and recurrent state, the GMI's own episode window,
  ``train.info_key``'s last value (:func:`info_meter`: an epoch without a report repeats it), how many
  of its episodes were in progress and the frames they had stepped, and which of one process's environments it
  stepped (:func:`global_envs`), so a start on another partition finds each environment's rows
  (:mod:`gmiexp.rl.rlgames.carry`).

GMI 0 writes the checkpoint; the other GMIs' records reach it through the gloo group when it saves (one
``all_gather_object`` of a few KiB per checkpoint). A start from it on the same partition gives every GMI its own
record back after rl-games' first reset (:func:`resume`): the run goes on bit for bit as if never stopped. Where
the simulator cannot save its state, its environments start fresh episodes from the new segment's seeds and the
episodes in progress are cut, counted (episodes and frames) and said once. A start on another partition (a
re-shape) goes on with what it can of the records: :mod:`gmiexp.rl.rlgames.carry`.
"""

from __future__ import annotations

from typing import Any

from gmiexp.plan.minibatch import gmi_envs
from gmiexp.rl.infos import InfoMeter
from gmiexp.rl.rlgames.checkpoint import EPISODE_METERS, restore_meter
from gmiexp.rl.state import Mismatch, generator_states, onto, own_record, set_generator_states, to_host

#: the agent's tensors that carry episodes over an epoch's end (rl-games' ``init_current_rewards`` makes them)
EPISODE_TENSORS = ("dones", "current_rewards", "current_shaped_rewards", "current_lengths")


def gmi_record(agent: Any) -> dict[str, Any]:
    """The agent's GMI's part of the run at an epoch's end, on the host (see the module docstring)."""
    lengths = to_host(agent.current_lengths)
    episodes = {"obs": to_host(agent.obs), **{name: to_host(getattr(agent, name)) for name in EPISODE_TENSORS}}
    if getattr(agent, "is_rnn", False):
        episodes["rnn_states"] = to_host(list(agent.rnn_states))
    env = agent.vec_env.get_env_state() if getattr(agent, "vec_env", None) is not None else None
    return {
        "gmi": int(agent.global_rank),
        "num_envs": int(lengths.shape[0]),
        "generators": generator_states(agent.ppo_device),
        "env": to_host(env),
        "episodes": episodes,
        "in_progress": int((lengths > 0).sum()),
        "frames_in_progress": int(lengths.sum()),
        "envs": global_envs(agent),
        "own_meters": own_meters(agent),
        "info": None if (meter := info_meter(agent)) is None else meter.value,
    }


def info_meter(agent: Any) -> InfoMeter | None:
    """``train.info_key``'s meter (the observer's): its last value stands in an epoch that reports none."""
    meter = getattr(getattr(agent, "algo_observer", None), "info", None)
    return meter if isinstance(meter, InfoMeter) else None


def global_envs(agent: Any) -> list[int]:
    """The environments of one process on the whole batch that the agent's GMI steps, in its order.

    :func:`gmiexp.plan.minibatch.gmi_envs`, ``e`` the GMI's minibatch in environments (a block of environments
    per GMI where that is not a whole number dividing the GMI's): the same environment on every partition.
    """
    n = int(agent.current_lengths.shape[0])
    horizon, minibatch = int(agent.horizon_length), int(agent.minibatch_size)
    e = minibatch // horizon if minibatch % horizon == 0 else n
    return gmi_envs(int(agent.global_rank), int(agent.world_size), n, e if e and n % e == 0 else n)


def own_meters(agent: Any) -> dict[str, dict[str, Any]]:
    """The GMI's own episode windows (``gmi/<id>/reward/mean``), where its meters keep one."""
    out = {}
    for name in EPISODE_METERS:
        own = getattr(getattr(agent, name, None), "local", None)
        if own is not None:
            out[name] = {"mean": own.mean.detach().cpu().clone(), "size": int(own.current_size)}
    return out


def resume(agent: Any, run: dict[str, Any] | None, rank: int, world_size: int) -> dict[str, Any]:
    """Give this GMI its part of the run back, after rl-games' first reset and before the first epoch.

    Returns what was done: ``restored`` (generators; and ``simulator``: the environments and their running
    episodes), and ``episodes_cut`` and ``frames_cut``, the episodes in progress at the save that this start does
    not go on with and the frames they had stepped, over the whole run (None when the checkpoint does not say).
    """
    mine = own_record(run, rank, world_size)
    report: dict[str, Any] = {"restored": False, "simulator": False, "episodes_cut": None, "frames_cut": None}
    if run is None:
        return report  # rl-games' own checkpoint (or an older gmiexp's): every episode starts again, uncounted
    records = run.get("gmis") or []
    if mine is not None:
        try:
            report["simulator"] = restore_episodes(agent, mine)
        except Mismatch:
            mine = None  # the same number of GMIs, but not these environments
    if mine is not None:
        _restore_own_meters(agent, mine.get("own_meters") or {})
        if (meter := info_meter(agent)) is not None:
            meter.value = mine.get("info")  # what an epoch without a report says next, as in the unbroken run
        set_generator_states(mine["generators"], agent.ppo_device)  # last: nothing draws before the first epoch
        report["restored"] = True
    # every GMI of a start restores alike (same simulator, same partition), so each one's outcome is the run's
    report.update(cuts(records, report["simulator"]))
    return report


def cuts(records: list[dict[str, Any]], carried: bool) -> dict[str, int | None]:
    """The episodes in progress at the save and their frames, that a start does not go on with (none: ``carried``).

    None for the frames of a checkpoint that does not say (written before they were counted).
    """
    if carried:
        return {"episodes_cut": 0, "frames_cut": 0}
    frames = [r.get("frames_in_progress") for r in records]
    return {"episodes_cut": sum(int(r.get("in_progress", 0)) for r in records),
            "frames_cut": None if None in frames else sum(frames)}


def restore_episodes(agent: Any, mine: dict[str, Any]) -> bool:
    """The simulator's state and the agent's running episodes, where the simulator saved its state."""
    env = getattr(agent, "vec_env", None)
    if mine.get("env") is None or env is None or env.get_env_state() is None:
        return False  # envpool and the like: fresh episodes from the segment's seeds
    episodes = mine["episodes"]
    fresh = {"obs": agent.obs, **{name: getattr(agent, name) for name in EPISODE_TENSORS}}
    if "rnn_states" in episodes:
        fresh["rnn_states"] = list(agent.rnn_states)
    back = onto(episodes, fresh)  # raises Mismatch before anything is changed
    env.set_env_state(mine["env"])
    agent.obs = back["obs"]
    for name in EPISODE_TENSORS:
        setattr(agent, name, back[name])
    if "rnn_states" in back:
        agent.rnn_states = back["rnn_states"]
    return True


def _restore_own_meters(agent: Any, saved: dict[str, dict[str, Any]]) -> None:
    for name, s in saved.items():
        restore_meter(getattr(getattr(agent, name, None), "local", None), s)


def resume_line(report: dict[str, Any], epoch: int, segment: int) -> str:
    """What GMI 0 says once at a resume."""
    head = f"gmiexp: resumed after epoch {epoch} (segment {segment}): "
    if report["simulator"]:
        return head + "generators, simulator and running episodes restored: no episode cut"
    what = ("generators restored, but the simulator cannot save its state" if report["restored"]
            else "generators and episodes not restored (the checkpoint holds none of this partition's)")
    return head + f"{what}; {cut_said(report, segment)}"


def cut_said(report: dict[str, Any], segment: int) -> str:
    """How many episodes in progress a start cut, and their frames, as GMI 0 says it."""
    cut, frames = report["episodes_cut"], report.get("frames_cut")
    counted = "an unknown number of" if cut is None else str(cut)
    stepped = "" if frames is None else f"{frames} frames; "
    return f"{counted} episodes in progress were cut ({stepped}the environments start new ones from segment " \
           f"{segment}'s seeds)"
