"""What an rsl_rl checkpoint holds of a run beside the model: every GMI's generators, simulator and running episodes.

rsl_rl 5 saves the models (normalisers inside), the optimiser (the learning rate in it) and the iteration; mjlab's
runner adds the environment's step counter. A start from it builds the environments afresh (every episode begins
again), re-randomises the episode lengths (``learn(init_at_random_ep_len=True)``), computes new observations and
draws from freshly seeded generators: a run stopped and resumed was not the run never stopped. The GMI runner
(:class:`gmiexp.rl.rslrl.runner.GMIRunnerMixin`) adds ``gmiexp_run`` (rl-games' checkpoints' key) to the
checkpoint's ``infos`` (rsl_rl's ``save(path, infos=...)``; its ``load`` hands ``infos`` back and reads nothing
else of it; mjlab's runner adds its ``env_state`` beside):

* ``segment``: the segment of the run that wrote it (:mod:`gmiexp.planner.seeds`);
* ``world_size`` and ``gmis``, one record per GMI in rank order (:func:`gmi_record`): its generators (torch's CPU
  generator, numpy's, random's, its device's), the group's minibatch permutation generator
  (:class:`gmiexp.rl.rslrl.minibatch.GroupRolloutStorage`), its simulator's state where it saves one (an mjlab
  environment: :mod:`gmiexp.envs.mjlab_state`; a VecEnv with ``get_env_state``/``set_env_state``), the observations
  rsl_rl's loop carries into the next iteration, the recurrent models' hidden states, the loggers' running episode
  sums and windows (gmiexp's per GMI, rsl_rl's of group rank 0) with ``train.info_key``'s last value (an
  iteration without a report repeats it), and how many of its episodes were in progress and the frames they had
  stepped.

A start from it on the same partition gives every GMI its own record back before ``learn`` (:func:`resume`), which
then neither re-randomises episode lengths nor computes new observations: the run goes on bit for bit as if never
stopped. Where the simulator cannot save its state, the environments start fresh episodes from the new segment's
seeds (episode lengths randomised, as at any fresh start) and the episodes in progress are cut, counted and said
once; on another partition nothing of the records is restored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from gmiexp.envs.mjlab_state import StateMismatch, env_state, set_env_state
from gmiexp.rl.rlgames.checkpoint import RUN_KEY  # rl-games' checkpoints' key, here under ``infos``
from gmiexp.rl.rlgames.checkpoint import run_segment as checkpoint_segment
from gmiexp.rl.state import (
    Mismatch,
    generator_states,
    learning_only,
    onto,
    own_record,
    set_generator_states,
    to_host,
)

#: rsl_rl's Logger fields that carry episodes over an iteration (group rank 0's TensorBoard figures)
RSL_LOGGER = ("rewbuffer", "lenbuffer", "cur_reward_sum", "cur_episode_length", "erewbuffer", "irewbuffer",
              "cur_ereward_sum", "cur_ireward_sum", "tot_timesteps")


def _on_device(obs: dict[str, Any], num_envs: int, device: Any) -> dict[str, Any]:
    """Saved observations (nested dicts of tensors) on ``device``, each a batch of ``num_envs``."""
    out: dict[str, Any] = {}
    for k, v in obs.items():
        if isinstance(v, dict):
            out[k] = _on_device(v, num_envs, device)
        elif not torch.is_tensor(v) or v.ndim == 0 or v.shape[0] != num_envs:
            raise Mismatch(f"observations {k!r}: saved {getattr(v, 'shape', v)}, here {num_envs} environments")
        else:
            out[k] = v.to(device)
    return out


def _mjlab(env: Any) -> Any:
    """The mjlab ``ManagerBasedRlEnv`` behind ``env``, or None."""
    base = getattr(env, "unwrapped", None)
    return base if base is not None and type(base).__module__.startswith("mjlab.") and hasattr(base, "sim") else None


def can_save(env: Any) -> bool:
    """Whether the simulator behind rsl_rl VecEnv ``env`` saves its state (mjlab's, or a ``get_env_state``)."""
    return _mjlab(env) is not None or callable(getattr(env, "get_env_state", None))


def simulator_state(env: Any) -> Any:
    """The state of the simulator behind rsl_rl VecEnv ``env`` on the host, or None where it cannot save one."""
    base = _mjlab(env)
    if base is not None:
        return env_state(base)
    get = getattr(env, "get_env_state", None)
    return to_host(get()) if callable(get) else None


def set_simulator_state(env: Any, state: Any) -> None:
    """Put :func:`simulator_state`'s ``state`` back (raises :class:`Mismatch` before changing anything that misfits)."""
    base = _mjlab(env)
    if base is not None:
        try:
            set_env_state(base, state)
        except StateMismatch as e:
            raise Mismatch(str(e)) from e
        return
    env.set_env_state(state)


def logger_state(logger: Any) -> dict[str, Any]:
    """The GMI's running episode sums and windows (``GMILogger``'s) and rsl_rl's own (group rank 0's)."""
    return {
        "sums": to_host(logger.sums),
        "windows": {k: list(v) for k, v in logger.windows.items()},
        "info": None if getattr(logger, "info", None) is None else logger.info.value,  # train.info_key's last
        "rsl_rl": {k: (list(v) if hasattr(v, "maxlen") else to_host(v))
                   for k in RSL_LOGGER if (v := getattr(logger, k, None)) is not None},
    }


def set_logger_state(logger: Any, saved: dict[str, Any]) -> None:
    sums = onto(saved["sums"], logger.sums)  # raises Mismatch before anything is changed
    for k, v in sums.items():
        logger.sums[k].copy_(v)
    for k, values in saved["windows"].items():
        logger.windows[k].clear()
        logger.windows[k].extend(values)
    for k, v in saved["rsl_rl"].items():
        live = getattr(logger, k, None)
        if hasattr(live, "maxlen"):
            live.clear()
            live.extend(v)
        elif torch.is_tensor(live):
            live.copy_(onto(v, live))
        elif live is not None:
            setattr(logger, k, v)


def _extend_windows(logger: Any, saved: dict[str, Any]) -> None:
    """The finished episodes' windows of ``saved``, ahead of those to come (running sums start again)."""
    for k, values in saved["windows"].items():
        logger.windows[k].extend(values)
    for k, v in saved["rsl_rl"].items():
        live = getattr(logger, k, None)
        if hasattr(live, "maxlen"):
            live.extend(v)


def hidden_states(alg: Any) -> list[Any]:
    """The actor's and critic's recurrent states (None each for a feed-forward model)."""
    return [to_host(m.get_hidden_state()) for m in (alg.actor, alg.critic)]


def gmi_record(runner: Any) -> dict[str, Any]:
    """The runner's GMI's part of the run at an iteration's end, on the host (see the module docstring)."""
    logger, alg = runner.logger, runner.alg
    lengths = logger.sums["lengths"]
    perm = getattr(alg.storage, "rng", None)
    obs = getattr(alg, "carried_obs", None)
    return {
        "gmi": int(runner.gpu_global_rank),
        "num_envs": int(lengths.shape[0]),
        "generators": generator_states(runner.device),
        "permutation": perm.get_state() if isinstance(perm, torch.Generator) else None,
        "env": simulator_state(runner.env.env),
        "obs": None if obs is None else to_host(obs.to_dict()),
        "hidden": hidden_states(alg),
        "logger": logger_state(logger),
        "in_progress": int((lengths > 0).sum()),
        "frames_in_progress": int(lengths.sum()),
    }


def resume(runner: Any, run: dict[str, Any] | None, rank: int, world_size: int) -> dict[str, Any]:
    """Give this GMI its part of the run back, after the checkpoint's models are loaded and before ``learn``.

    Returns what was done, as :func:`gmiexp.rl.rlgames.runstate.resume` says it: ``restored`` (generators, episode
    windows), ``simulator`` (the environments, their running episodes and the carried observations), and
    ``episodes_cut`` and ``frames_cut`` over the whole run (None when the checkpoint does not say).
    """
    report: dict[str, Any] = {"restored": False, "simulator": False, "episodes_cut": None, "frames_cut": None}
    if run is None:
        return report  # rsl_rl's or mjlab's own checkpoint: every episode starts again, uncounted
    records = run.get("gmis") or []
    mine = own_record(run, rank, world_size)
    if mine is not None:
        try:
            report["simulator"] = _restore_episodes(runner, mine)
        except Mismatch:
            mine = None  # the same number of GMIs, but not these environments
    if mine is not None:
        if report["simulator"]:
            set_logger_state(runner.logger, mine["logger"])
        else:  # fresh episodes: only the finished ones' windows go on
            _extend_windows(runner.logger, mine["logger"])
        if getattr(runner.logger, "info", None) is not None:  # the value an epoch without a report says next
            runner.logger.info.value = mine["logger"].get("info")
        perm = getattr(runner.alg.storage, "rng", None)
        if isinstance(perm, torch.Generator) and mine.get("permutation") is not None:
            perm.set_state(mine["permutation"])
        set_generator_states(mine["generators"], runner.device)  # last: nothing draws before the first rollout
        report["restored"] = True
    if report["simulator"]:
        report.update(episodes_cut=0, frames_cut=0)
    else:
        report.update(episodes_cut=sum(int(r.get("in_progress", 0)) for r in records),
                      frames_cut=sum(int(r.get("frames_in_progress", 0)) for r in records))
    return report


def _restore_episodes(runner: Any, mine: dict[str, Any]) -> bool:
    """The simulator's state, the carried observations and the recurrent states, where the simulator saved one."""
    vec = runner.env
    if mine.get("env") is None or mine.get("obs") is None or not can_save(vec.env):
        return False
    obs = _on_device(mine["obs"], int(vec.num_envs), vec.device)  # raises Mismatch before anything is changed
    onto(mine["logger"]["sums"], runner.logger.sums)
    set_simulator_state(vec.env, mine["env"])
    vec.carry(TensorDict(obs, batch_size=[int(vec.num_envs)]))
    for model, h in zip((runner.alg.actor, runner.alg.critic), mine.get("hidden") or (None, None), strict=True):
        if h is not None:
            model.reset(hidden_state=onto(h, model.get_hidden_state()))
    return True


class CarriedObservations(VecEnv):
    """rsl_rl's VecEnv of a GMI: the factory's own, whose first observations after a resume are the carried ones.

    rsl_rl's ``learn`` starts from ``env.get_observations()``; an mjlab environment computes them anew there (its
    noise draws from the generators, its history moves on), where the run never stopped goes on with the
    observations the last step returned. After :func:`resume` the first call returns those; every other call, and
    everything else, is the wrapped environment's.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.num_envs, self.num_actions = env.num_envs, env.num_actions
        self.max_episode_length, self.device = env.max_episode_length, env.device
        self._carried: TensorDict | None = None

    @property
    def cfg(self) -> Any:  # type: ignore[override]
        return self.env.cfg

    @property
    def episode_length_buf(self) -> torch.Tensor:  # type: ignore[override]
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length_buf = value

    @property
    def unwrapped(self) -> Any:
        """The simulator's own environment (mjlab's runner reads its step counter there)."""
        return getattr(self.env, "unwrapped", self.env)

    def carry(self, obs: TensorDict) -> None:
        """Return ``obs`` at the next :meth:`get_observations`."""
        self._carried = obs

    def get_observations(self) -> TensorDict:
        obs, self._carried = self._carried, None
        return obs if obs is not None else self.env.get_observations()

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        return self.env.step(actions)

    def __getattr__(self, name: str) -> Any:
        """Whatever else the wrapped environment offers (``close``, ``render``, a task's own attributes)."""
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


def for_another_run(state: dict[str, Any], changed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """rsl_rl checkpoint ``state`` as another run starts from it (a PBT member copying its leader): the learning only.

    The models (normalisers inside), the optimiser and the iteration stay, and mjlab's ``env_state`` (its curricula's
    step counter, as mjlab's own load restores it); the writer's part of the run under ``infos`` goes
    (:func:`gmiexp.rl.state.learning_only`, as rl-games' twin drops it). ``changed``: rsl_rl algorithm keys the new
    run sets otherwise (``learning_rate``: 5e-4). rsl_rl's load takes the learning rate from the optimiser's groups,
    so a mutated ``learning_rate`` goes into them there, where the saved rate would override it.
    """
    out = dict(state)
    infos = state.get("infos")
    if isinstance(infos, dict) and RUN_KEY in infos:
        out["infos"] = {**infos, RUN_KEY: learning_only(infos[RUN_KEY])}
    lr = (changed or {}).get("learning_rate")
    if lr is not None and isinstance(state.get("optimizer_state_dict"), dict):
        opt = dict(state["optimizer_state_dict"])
        opt["param_groups"] = [{**g, "lr": float(lr)} for g in opt["param_groups"]]
        out["optimizer_state_dict"] = opt
    return out


def run_segment(infos: dict[str, Any] | None) -> int:
    """The segment a start from a checkpoint with ``infos`` is (rl-games' rule: the one that wrote it, plus one)."""
    return checkpoint_segment(infos or {})


__all__ = ["RUN_KEY", "CarriedObservations", "can_save", "for_another_run", "gmi_record", "resume", "run_segment",
           "set_simulator_state", "simulator_state"]
