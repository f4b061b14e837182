"""rsl_rl VecEnvs for the GMIs: mjlab's own by task id, or any ``module:function`` factory a task names.

A factory is called as ``factory(env_id, num_envs=..., device=..., seed=..., **task.env_config)`` in each GMI,
with that GMI's share of the global batch and its own device, and returns an rsl_rl ``VecEnv`` (mjlab's
``RslRlVecEnvWrapper`` over ``ManagerBasedRlEnv``; Isaac Lab's ``RslRlVecEnvWrapper`` over
``gym.make(task, cfg=env_cfg)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from typing import Any

from gmiexp.envs.mjlab_env import sim_device, stdout_to_stderr
from gmiexp.envs.warp_cache import configure_warp_cache
from gmiexp.errors import ConfigError
from gmiexp.registry import import_spec
from gmiexp.rl.rslrl.config import merge, read_file, runner_config, upgrade_legacy

#: the factory of ``task.simulator=mjlab`` when the task names none
MJLAB_FACTORY = "gmiexp.rl.rslrl.envs:mjlab_vec_env"


def load_factory(spec: str) -> Callable[..., Any]:
    """The ``module:function`` a task names (exit 2 naming the problem when it does not resolve)."""
    valid = "<module>:<function> returning an rsl_rl VecEnv"
    fn = import_spec(spec, "task.vec_env", valid)
    if not callable(fn):
        raise ConfigError(f"invalid task.vec_env: {spec!r}; valid: {valid} ({spec.partition(':')[2]!r} is not "
                          "callable)")
    return fn


def set_path(obj: Any, dotted: str, value: Any) -> None:
    """``obj.a.b = value`` for ``dotted`` ``a.b`` (mjlab's environment config is nested dataclasses)."""
    *parents, last = dotted.split(".")
    for p in parents:
        obj = obj[p] if isinstance(obj, dict) else getattr(obj, p)
    if isinstance(obj, dict):
        obj[last] = value
    elif hasattr(obj, last):
        setattr(obj, last, value)
    else:
        raise ConfigError(f"invalid task.env_config key: {dotted!r}; the environment config has no {last!r}")


def mjlab_vec_env(env_id: str, *, num_envs: int, device: str, seed: int, render_mode: str | None = None,
                  **env_config: Any) -> Any:
    """The mjlab training path for one GMI: the registered env config, ``ManagerBasedRlEnv``, ``RslRlVecEnvWrapper``.

    ``env_config`` sets fields of mjlab's env config by dotted path (``episode_length_s``, ``scene.env_spacing``).
    mjlab steps on the GMI's GPU, else on the CPU (a stand-in model device such as ``lazy`` included).
    ``render_mode="rgb_array"``: mjlab's offscreen renderer is built with the environment (``mode=eval``'s video).
    """
    configure_warp_cache()
    import mjlab.tasks  # noqa: F401  (registers the tasks)
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.rl import RslRlVecEnvWrapper
    from mjlab.tasks.registry import load_env_cfg, load_rl_cfg

    cfg = load_env_cfg(env_id)
    cfg.scene.num_envs = int(num_envs)
    cfg.seed = int(seed)
    for k, v in env_config.items():
        set_path(cfg, k, v)
    with stdout_to_stderr():
        env = ManagerBasedRlEnv(cfg=cfg, device=sim_device(device), render_mode=render_mode)
    return RslRlVecEnvWrapper(env, clip_actions=load_rl_cfg(env_id).clip_actions)


def mjlab_recipe(env_id: str) -> tuple[dict[str, Any], type]:
    """The registered mjlab rsl_rl config for ``env_id`` (as ``mjlab train`` passes it) and the task's runner class."""
    import mjlab.tasks  # noqa: F401
    from mjlab.rl import MjlabOnPolicyRunner
    from mjlab.tasks.registry import list_tasks, load_rl_cfg, load_runner_cls

    if env_id not in list_tasks():
        raise ConfigError(f"invalid task.env_id: {env_id!r}; valid mjlab tasks: {', '.join(sorted(list_tasks()))}")
    return asdict(load_rl_cfg(env_id)), (load_runner_cls(env_id) or MjlabOnPolicyRunner)


def runner_config_of(task: Any, file: str, overrides: Mapping[str, Any], needs: Iterable[str] = ()) -> dict[str, Any]:
    """The runner config a ``train=rslrl`` run's GMIs build (the role's recipe, ``train.file``, ``train.rslrl``).

    An mjlab task's registered recipe is read only when ``train.file`` and ``train.rslrl`` leave one of ``needs``
    (dotted keys: ``num_steps_per_env``, ``algorithm.gamma``) to it: importing mjlab takes seconds, so the plan
    does not, but a population controller needs an epoch's frames and the values a mutation starts from.
    """
    given = merge(upgrade_legacy(read_file(file)) if file else {}, upgrade_legacy(dict(overrides)))

    def has(dotted: str) -> bool:
        node: Any = given
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return False
            node = node[part]
        return True

    recipe: dict[str, Any] = {}
    if task.simulator == "mjlab" and not task.vec_env and not all(has(k) for k in needs):
        recipe = mjlab_recipe(task.env_id)[0]
    return runner_config(recipe, file, overrides)
