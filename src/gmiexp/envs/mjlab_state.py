"""An mjlab environment's state at an iteration's end, saved and put back, so a resumed run steps on exactly.

mjlab 1.6 keeps no state API on ``ManagerBasedRlEnv`` (its runner's checkpoint holds ``common_step_counter`` only,
for curricula), and a fresh environment starts every episode again. What carries over a step is:

* the **simulation**: MuJoCo's integration state of every world (``mujoco_warp.get_state`` with
  ``State.INTEGRATION``: time, qpos, qvel, act, actuator history, warm start, controls, applied forces, mocap, user
  data: what MuJoCo names as enough to reproduce ``mj_step`` exactly), and the model fields mjlab expanded per world
  for domain randomisation (``Simulation.expanded_fields``). Everything else in ``Data`` is derived: one
  ``forward`` recomputes it, as mjlab's own ``step`` ends with one;
* every **tensor** the environment, its managers and their terms, the scene's entities and sensors hold (the
  episode length buffer, the action manager's last actions, the reward manager's episode sums, command timers,
  event intervals, termination and curriculum state, observation history and delay buffers, noise models' state,
  the last observations ``obs_buf``), found by walking their attributes; and their plain numbers (the step
  counters, a term's scalar state). Configs (dataclasses) are not walked: they are the task, not its state.

Light: mjlab and mujoco_warp are imported by the caller's environment, not here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

#: the packages whose objects hold the environment's state (their attributes are walked)
OWNERS = ("mjlab.",)
#: objects the walk does not enter: the simulation (saved as MuJoCo's state) and its zero-copy views, the viewer
SKIP = ("Simulation", "WarpBridge", "TorchArray", "OffscreenRenderer", "NanGuard")
SCALARS = (bool, int, float)
#: attributes rebuilt at every step, not carried over one (the step's ``extras``: its log, rsl_rl's time-outs)
PER_STEP = ("extras",)


class StateMismatch(ValueError):
    """A saved state that does not fit this environment (another task, other sizes): nothing is changed."""


def _walk(obj: Any, path: str, seen: set[int]) -> Iterator[tuple[str, Any]]:
    """``(path, leaf)`` for every tensor, generator and plain number reachable from ``obj`` (see the module)."""
    if isinstance(obj, torch.Tensor | torch.Generator):
        if id(obj) not in seen:
            seen.add(id(obj))
            yield path, obj
        return
    if type(obj) in SCALARS or (type(obj) is tuple and obj and all(type(x) in SCALARS for x in obj)):
        yield path, obj  # a number, or a range such as a command's (low, high): set whole
        return
    if id(obj) in seen:
        return
    if isinstance(obj, dict):
        seen.add(id(obj))
        for k, v in obj.items():
            if isinstance(k, str | int):
                yield from _walk(v, f"{path}[{k!r}]", seen)
        return
    if isinstance(obj, list | tuple):
        seen.add(id(obj))
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]", seen)
        return
    kind = type(obj)
    if not kind.__module__.startswith(OWNERS) or kind.__name__ in SKIP or not hasattr(obj, "__dict__"):
        return
    seen.add(id(obj))
    for name, v in vars(obj).items():
        if name not in PER_STEP:
            yield from _walk(v, f"{path}.{name}" if path else name, seen)


def _leaves(env: Any) -> dict[str, Any]:
    return dict(_walk(env, "", set()))


def env_state(env: Any) -> dict[str, Any]:
    """The state of mjlab environment ``env`` (``ManagerBasedRlEnv``) on the host (see the module)."""
    import mujoco
    import mujoco_warp as mjwarp
    import warp as wp

    sim = env.sim
    sig = int(mjwarp.State.INTEGRATION)
    size = mujoco.mj_stateSize(sim.mj_model, sig)
    with wp.ScopedDevice(sim.wp_device):
        arr = wp.zeros((sim.num_envs, size), dtype=float)
        mjwarp.get_state(sim.wp_model, sim.wp_data, arr, sig)
        integration = torch.from_numpy(arr.numpy()).clone()
    leaves = {}
    for path, leaf in _leaves(env).items():
        if isinstance(leaf, torch.Generator):
            leaves[path] = {"generator": leaf.get_state()}
        elif isinstance(leaf, torch.Tensor):
            leaves[path] = leaf.detach().cpu().clone()
        else:
            leaves[path] = leaf
    return {
        "integration": integration,
        "model": {f: getattr(sim.model, f).detach().cpu().clone() for f in sorted(sim.expanded_fields)},
        "leaves": leaves,
    }


def set_env_state(env: Any, state: dict[str, Any]) -> None:
    """Put ``state`` (:func:`env_state` of an environment of the same task and size) back into ``env``.

    Raises :class:`StateMismatch` before anything is changed when the state does not fit.
    """
    import mujoco_warp as mjwarp
    import warp as wp

    sim = env.sim
    here = _leaves(env)
    _check(state, here, sim)
    sig = int(mjwarp.State.INTEGRATION)
    with wp.ScopedDevice(sim.wp_device):
        arr = wp.array(state["integration"].numpy(), dtype=float)
        mjwarp.set_state(sim.wp_model, sim.wp_data, arr, sig)
    for f, saved in state["model"].items():
        getattr(sim.model, f)[:] = saved.to(sim.device)
    sim.forward()  # the derived quantities, as mjlab's step leaves them
    for path, saved in state["leaves"].items():
        if path not in here:  # made by the first step (``reset_buf``, ``reward_buf``): made here as it left it
            _assign(env, path, saved.to(sim.device) if torch.is_tensor(saved) else saved)
            continue
        live = here[path]
        if isinstance(live, torch.Generator):
            live.set_state(saved["generator"])
        elif isinstance(live, torch.Tensor):
            with torch.no_grad():
                live.copy_(saved)
        elif type(live) is type(saved) and live != saved:
            _assign(env, path, saved)


def _check(state: dict[str, Any], here: dict[str, Any], sim: Any) -> None:
    if tuple(state["integration"].shape[:1]) != (sim.num_envs,):
        raise StateMismatch(f"saved {state['integration'].shape[0]} worlds, here {sim.num_envs}")
    if set(state["model"]) != set(sim.expanded_fields):
        raise StateMismatch("other per-world model fields")
    missing = sorted(set(here) - set(state["leaves"]))
    if missing:
        raise StateMismatch(f"other state: {', '.join(missing[:3])}")
    for path, saved in state["leaves"].items():
        live = here.get(path)
        if live is None and isinstance(saved, dict):
            raise StateMismatch(f"{path}: a generator this environment does not have")
        if isinstance(live, torch.Tensor) and (not torch.is_tensor(saved) or saved.shape != live.shape
                                               or saved.dtype != live.dtype):
            raise StateMismatch(f"{path}: saved {getattr(saved, 'shape', saved)}, here {tuple(live.shape)}")


def _assign(root: Any, path: str, value: Any) -> None:
    """``root.<path> = value`` for a path :func:`_walk` wrote (attributes, ``[key]`` and ``[index]`` steps)."""
    import ast
    import re

    steps = re.findall(r"\.?([A-Za-z_]\w*)|\[([^\]]+)\]", path)
    obj = root
    for i, (attr, key) in enumerate(steps):
        last = i == len(steps) - 1
        k = ast.literal_eval(key) if key else None
        if last:
            if attr:
                setattr(obj, attr, value)
            else:
                obj[k] = value
            return
        obj = getattr(obj, attr) if attr else obj[k]
