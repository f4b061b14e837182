"""``task=<id>`` for every task mjlab registers: the ``task`` group's options beyond ``conf/task/*.yaml``.

A Hydra config source (``gmiexp-mjlab://``, on ``hydra.searchpath`` in ``conf/config.yaml``) answers ``task/<id>``
for any id in mjlab's registry (``mjlab.tasks.registry``) with a task config built from the registered env config and
rsl_rl recipe: ``simulator: mjlab``, ``env_id: <id>``, the actor's hidden sizes as ``mlp_units`` (rl-games' network),
the episode length in steps, and the critic group as ``central_value``. ``train=rslrl`` then takes the env config
and recipe from the registry itself (:mod:`gmiexp.rl.rslrl.envs`), so no file per task is kept in step with mjlab.

Hydra asks this source only for a ``task`` option no YAML under ``conf/task`` has (the file source comes first), so
the light paths (``mode=plan`` of other tasks, ``--help``) never import mjlab; an id that is neither is refused
before Hydra runs (:func:`check_task_override`, exit 2, naming the valid ones).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib.util
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.object_type import ObjectType
from hydra.core.plugins import Plugins
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from omegaconf import OmegaConf

from gmiexp.errors import ConfigError, invalid, listed

#: the config source's scheme (conf/config.yaml: ``hydra.searchpath: [gmiexp-mjlab://tasks]``)
SCHEME = "gmiexp-mjlab"
GROUP = "task"


def available() -> bool:
    """Whether mjlab is installed (the ``gmiexp[mjlab]`` extra); found without importing it."""
    return importlib.util.find_spec("mjlab") is not None


def registered() -> list[str]:
    """Every task id mjlab registers (imports ``mjlab.tasks``, which registers them; its chatter goes to stderr)."""
    if not available():
        return []
    with contextlib.redirect_stdout(sys.stderr):  # mode=plan's stdout is the Plan
        import mjlab.tasks  # noqa: F401
        from mjlab.tasks.registry import list_tasks
    return list(list_tasks())


def task_fields(env_id: str) -> dict[str, Any]:
    """The ``task`` config of a registered mjlab task, from its env config and rsl_rl recipe."""
    from mjlab.tasks.registry import load_env_cfg, load_rl_cfg

    env, rl = load_env_cfg(env_id), load_rl_cfg(env_id)
    step_s = float(env.decimation) * float(env.sim.mujoco.timestep)
    groups = getattr(env, "observations", {}) or {}
    return {
        "name": env_id, "simulator": "mjlab", "env_id": env_id,
        "mlp_units": [int(u) for u in rl.actor.hidden_dims],
        "max_episode_length": max(1, math.ceil(float(env.episode_length_s) / step_s)),
        "continuous": True, "central_value": "critic" in groups,
    }


def missing_files(env_cfg: Any) -> list[str]:
    """The data files a task's commands read that it does not have, each with why (empty: none missing).

    mjlab's motion tracking replays a motion (``commands.motion.motion_file``, an ``.npz``), which the registered
    config leaves empty: ``mjlab train`` downloads one from a W&B registry (``--registry-name``) into it.
    """
    out = []
    for name, term in sorted((getattr(env_cfg, "commands", None) or {}).items()):
        for f in dataclasses.fields(term) if dataclasses.is_dataclass(term) else ():
            value = getattr(term, f.name)
            if f.name.endswith("_file") and isinstance(value, str) and not Path(value).is_file():
                out.append(f"commands.{name}.{f.name}={value!r}: the task reads this file in every environment "
                           "and mjlab's registered config has none (mjlab's train downloads a motion from a W&B "
                           "registry, --registry-name); gmiexp has no motion to give it")
    return out


def host_problems(env_id: str) -> list[str]:
    """Why a registered task cannot run here, every reason (empty: it can).

    Tried task by task (experiments/mjlab_tasks): the camera tasks (RGB, depth, segmentation) run on a CPU host,
    MuJoCo Warp's renderer included; what fails in every GMI is a data file the registered config does not have.
    """
    from mjlab.tasks.registry import load_env_cfg

    return missing_files(load_env_cfg(env_id))


def check_host(env_id: str) -> None:
    """Refuse (exit 2) a registered task this host cannot run, naming every reason at once."""
    bad = host_problems(env_id)
    if bad:
        raise listed(f"invalid task: {env_id!r}; mjlab's task cannot run here ({len(bad)} reason(s))", bad,
                     f"invalid task: {env_id!r}; mjlab's task cannot run here")


def task_config(env_id: str) -> dict[str, Any]:
    """The group option Hydra loads for ``task=<env_id>``: the task schema plus :func:`task_fields`."""
    return {"defaults": ["/task_schema@_here_", "_self_"], **task_fields(env_id)}


def file_options(conf: str | Path) -> list[str]:
    """The ``task`` options ``conf/task/*.yaml`` holds."""
    return sorted(p.stem for p in (Path(conf) / GROUP).glob("*.yaml"))


def _task_values(args: Sequence[str]) -> list[str]:
    """The names a command line picks for the ``task`` group (``task=A`` or a sweep ``task=A,B``)."""
    out = []
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+") == GROUP and not any(c in value for c in "()[]{}$*"):
            out += [v.strip() for v in value.split(",") if v.strip()]
    return out


def searched_options(args: Sequence[str]) -> list[str] | None:
    """The ``task`` options in the directories a ``hydra.searchpath=[file://...]`` override adds.

    A user's own task files; None when the override adds a source whose options cannot be listed here
    (``pkg://``: Hydra decides).
    """
    out: list[str] = []
    for arg in args:
        key, sep, value = arg.partition("=")
        if not (sep and key.lstrip("+") == "hydra.searchpath"):
            continue
        for entry in value.strip("[]").split(","):
            entry = entry.strip().strip("'\"")
            if not entry:
                continue
            if not entry.startswith("file://"):
                return None
            out += file_options(entry.removeprefix("file://"))
    return out


def stored_options() -> list[str]:
    """The ``task`` options registered in Hydra's ConfigStore (a user's Python-defined tasks)."""
    from hydra.core.config_store import ConfigStore

    try:
        return [name.removesuffix(".yaml") for name in ConfigStore.instance().list(GROUP)]
    except OSError:  # no task stored
        return []


def check_task_override(args: Sequence[str], conf: str | Path) -> None:
    """Refuse (exit 2) a ``task=`` option that is no task file and no mjlab task id, naming them all.

    Task files: ``conf/task``'s, those of a ``hydra.searchpath`` override's directories and those stored in Hydra's
    ConfigStore.
    """
    searched = searched_options(args)
    if searched is None:
        return
    files = sorted({*file_options(conf), *searched, *stored_options()})
    unknown = [v for v in _task_values(args) if v not in files]
    if not unknown:
        return
    if available() and "mjlab.tasks" not in sys.modules:  # mjlab's import takes seconds: say what is happening
        print(f"gmiexp: task {', '.join(unknown)}: no task file; looking in mjlab's registry (imports mjlab)",
              file=sys.stderr, flush=True)
    ids = registered()
    for name in unknown:
        if name not in ids:
            close = difflib.get_close_matches(name, [*files, *ids], n=1)
            hints = [f"did you mean {close[0]}?" if close else "",
                     "" if available() else "mjlab's task ids need gmiexp[mjlab]"]
            raise invalid("task", name, [*files, *ids], " ".join(h for h in hints if h))


class MjlabTaskSource(ConfigSource):
    """mjlab's registered tasks as options of the ``task`` group."""

    @staticmethod
    def scheme() -> str:
        return SCHEME

    def _id(self, config_path: str) -> str:
        group, _, name = self._normalize_file_name(config_path.rstrip("/")).partition("/")
        return name.removesuffix(".yaml") if group == GROUP else ""

    def load_config(self, config_path: str) -> ConfigResult:
        env_id = self._id(config_path)
        if not env_id or env_id not in registered():
            raise ConfigLoadError(f"mjlab registers no task {env_id!r}")
        try:
            node = task_config(env_id)
        except Exception as e:  # an id whose configs cannot be built here: say which and why
            raise ConfigError(f"invalid task: {env_id!r}; mjlab's configs for it cannot be built ({e})") from e
        return ConfigResult(config=OmegaConf.create(node), path=f"{SCHEME}://{self.path}", provider=self.provider,
                            header={"package": None})

    def available(self) -> bool:
        return True

    def is_group(self, config_path: str) -> bool:
        return config_path.rstrip("/") == GROUP and available()

    def is_config(self, config_path: str) -> bool:
        env_id = self._id(config_path)
        return bool(env_id) and env_id in registered()

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        # mjlab is imported only once something asked for one of its tasks: --help stays light
        if config_path.rstrip("/") != GROUP or "mjlab.tasks" not in sys.modules:
            return []
        return [] if results_filter == ObjectType.GROUP else sorted(registered())


def register_source() -> None:
    """Make the ``gmiexp-mjlab://`` scheme known to Hydra (idempotent)."""
    Plugins.instance().register(MjlabTaskSource)
