"""Every rsl_rl internal gmiexp builds on, named once, with the releases it was checked against.

gmiexp subclasses rsl_rl's runner, logger, PPO, storage and normaliser and overrides their methods. rsl_rl does not
promise to keep these: an override whose name a release changes is never called again (rsl_rl's own code runs in
its place, without an error), a private field renamed (the normaliser's ``_mean``) or a call moved elsewhere changes
what G GMIs compute. :func:`problems` checks each :class:`Hook` on the installed rsl_rl: the tests do under every
release in :data:`CHECKED` (``make test`` and ``make test-rslrl-next``), and every ``train=rslrl`` GMI does before it
builds its runner (:func:`require`), so a release that changed one stops the run naming what changed.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

#: rsl-rl-lib releases every hook below was checked against (pyproject.toml's range holds them): mjlab 1.6.0 pins
#: 5.4.2, Isaac Lab 3.0 requires 5.5.1
CHECKED = ("5.4.2", "5.5.1")

Kind = Literal["method", "params", "calls", "assigns", "buffers"]


@dataclass(frozen=True)
class Hook:
    """One thing of rsl_rl's gmiexp relies on: ``where`` (``module:Class`` or ``module:Class.method``) and ``kind``.

    * ``method``: the class defines each of ``names`` (gmiexp overrides them; a rename leaves the override dead);
    * ``params``: the method takes each of ``names`` as a keyword (gmiexp calls it, or is called, with them);
    * ``calls``: the method's source calls each of ``names`` (gmiexp's override runs only where rsl_rl calls it);
    * ``assigns``: the class's ``__init__`` sets ``self.<name>`` for each of ``names`` (gmiexp reads or sets them);
    * ``buffers``: an instance made with ``make``'s keywords registers each of ``names`` as a buffer.
    """

    where: str
    kind: Kind
    names: tuple[str, ...]
    why: str
    make: tuple[tuple[str, Any], ...] = ()


_RUNNER, _PPO = "rsl_rl.runners:OnPolicyRunner", "rsl_rl.algorithms:PPO"
_LOGGER, _STORAGE = "rsl_rl.utils.logger:Logger", "rsl_rl.storage:RolloutStorage"
_NORM = "rsl_rl.modules:EmpiricalNormalization"

HOOKS: tuple[Hook, ...] = (
    # the runner (gmiexp.rl.rslrl.runner.GMIRunnerMixin)
    Hook(_RUNNER, "method", ("_configure_multi_gpu",),
         "GMIRunnerMixin replaces it: the group is gmiexp's (rsl_rl's would start NCCL, one rank per GPU)"),
    Hook(f"{_RUNNER}.__init__", "calls", ("_configure_multi_gpu", "construct_algorithm", "Logger"),
         "the runner sets up its group, its algorithm and its logger there, in that order"),
    Hook(f"{_RUNNER}.learn", "calls", ("broadcast_parameters", "process_env_step", "compute_returns", "update",
                                       "log"),
         "GMIPPO's and GMILogger's overrides run where rsl_rl's loop calls them"),
    # the run a checkpoint holds (gmiexp.rl.rslrl.runstate)
    Hook(f"{_RUNNER}.save", "params", ("path", "infos"),
         "GMIRunnerMixin.save passes the run's state as infos (rsl_rl's place for more in its checkpoint)"),
    Hook(f"{_RUNNER}.load", "calls", ("infos",), "a start from a checkpoint reads the run's state back from infos"),
    Hook(f"{_RUNNER}.learn", "params", ("init_at_random_ep_len",),
         "a resume whose environments were restored does not re-randomise their episode lengths"),
    Hook(f"{_RUNNER}.learn", "calls", ("get_observations",),
         "rsl_rl's loop starts from the VecEnv's observations: CarriedObservations hands back the carried ones"),
    Hook(_LOGGER, "assigns", ("rewbuffer", "lenbuffer", "cur_reward_sum", "cur_episode_length", "tot_timesteps"),
         "rsl_rl's running episodes and windows, kept in a checkpoint"),
    Hook("rsl_rl.models:MLPModel", "method", ("get_hidden_state", "reset"),
         "a checkpoint keeps a recurrent model's hidden state; a resume puts it back with reset(hidden_state=...)"),
    Hook("rsl_rl.models:MLPModel.reset", "params", ("hidden_state",), "a resume puts a recurrent state back"),
    # the logger (gmiexp.rl.rslrl.runner.GMILogger), built by gmiexp with the runner's own arguments
    Hook(f"{_LOGGER}.__init__", "params", ("log_dir", "cfg", "env_cfg", "num_envs", "is_distributed",
                                           "gpu_world_size", "gpu_global_rank", "device"),
         "GMIRunnerMixin builds GMILogger in place of the runner's logger, with these keywords"),
    Hook(_LOGGER, "assigns", ("log_dir", "env_cfg", "num_envs", "cfg", "device"),
         "read back from the runner's own logger, and by GMILogger"),
    Hook(f"{_LOGGER}.process_env_step", "params", ("rewards", "dones", "extras", "intrinsic_rewards"),
         "GMILogger's override counts each GMI's episodes"),
    Hook(f"{_LOGGER}.log", "params", ("it", "start_it", "total_it", "collect_time", "learn_time", "loss_dict",
                                      "learning_rate", "action_std", "rnd_weight"),
         "GMILogger's override writes the GMI's history row and ends training at a stop"),
    # PPO (gmiexp.rl.rslrl.ppo.GMIPPO)
    Hook(_PPO, "method", ("broadcast_parameters", "reduce_parameters", "construct_algorithm", "act",
                          "process_env_step", "compute_returns", "update", "save"),
         "GMIPPO overrides them: the Plan's reduction and gmiexp's group in place of rsl_rl's torch.distributed"),
    Hook(f"{_PPO}.__init__", "params", ("device", "multi_gpu_cfg"),
         "construct_algorithm passes them by keyword, with the algorithm config (GMIPPO's group among it)"),
    Hook(f"{_PPO}.update", "calls", ("reduce_parameters", "mini_batch_generator", "recurrent_mini_batch_generator",
                                     "get_kl_divergence", "all_reduce"),
         "gradients and minibatches go through gmiexp's overrides there, and the adaptive schedule's KL (weighted "
         "by group_kl) through rsl_rl's own all_reduce on gmiexp's default group"),
    Hook(_PPO, "assigns", ("_raw_actor", "_raw_critic", "gpu_global_rank", "is_multi_gpu", "storage", "rnd",
                           "normalize_advantage_per_mini_batch", "learning_rate", "device"),
         "GMIPPO's models (the uncompiled _raw_ handles), its group storage, and the schedule's rank"),
    # the storage (gmiexp.rl.rslrl.minibatch.GroupRolloutStorage)
    Hook(f"{_STORAGE}.__init__", "params", ("training_type", "num_envs", "num_transitions_per_env", "obs",
                                            "actions_shape", "device"),
         "GroupRolloutStorage is built like the storage rsl_rl made"),
    Hook(_STORAGE, "method", ("mini_batch_generator", "recurrent_mini_batch_generator"),
         "GroupRolloutStorage cuts this GMI's rows of one process's minibatches there"),
    Hook(_STORAGE, "assigns", ("training_type", "num_envs", "num_transitions_per_env", "observations",
                               "actions_shape", "device", "actions", "values", "returns", "actions_log_prob",
                               "advantages", "distribution_params"),
         "GroupRolloutStorage reads the rollout from them"),
    # the normalisers (gmiexp.rl.rslrl.sync.GroupNormalization): a rename would leave each GMI on its own rows
    Hook(_NORM, "method", ("update", "forward"),
         "GroupNormalization replaces update (the group's moments; 5.5's own all-reduce never runs) and flushes "
         "the step's updates before a forward pass"),
    Hook(f"{_NORM}.__init__", "params", ("shape", "eps", "until"),
         "GroupNormalization is built like the normaliser it replaces"),
    Hook(_NORM, "buffers", ("_mean", "_var", "_std", "count"),
         "GroupNormalization steps these with the group's moments (rsl_rl's update formula)",
         make=(("shape", 1),)),
    Hook(_NORM, "assigns", ("eps", "until"), "GroupNormalization is built like the normaliser it replaces"),
    Hook(f"{_NORM}.forward", "calls", ("_mean", "_std"), "the statistics GroupNormalization steps are the ones used"),
    Hook("rsl_rl.modules:EmpiricalDiscountedVariationNormalization", "assigns", ("emp_norm",),
         "RND's reward normaliser: its inner normaliser updates at once (rsl_rl reads its _std right after)"),
    # the actor (gmiexp.rl.rslrl.ppo.group_kl)
    Hook("rsl_rl.models:MLPModel", "method", ("get_kl_divergence",),
         "group_kl weighs the actor's KL by the GMI's share of the minibatch (rsl_rl passes old, new)"),
)


def resolve(where: str) -> Any:
    """The rsl_rl object ``module:Class`` or ``module:Class.attr`` names."""
    module, _, path = where.partition(":")
    obj: Any = importlib.import_module(module)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _source(obj: Any) -> str:
    return inspect.getsource(obj)


def _assigned(cls: type) -> set[str]:
    """The ``self.<name>`` that ``cls``'s ``__init__`` (or a base class's) assigns."""
    out: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None and klass is not object:
            with_src = _source(init)
            out |= set(re.findall(r"self\.(\w+)\s*(?::[^=\n]+)?=(?!=)", with_src))
            out |= set(re.findall(r"register_buffer\(\s*[\"'](\w+)[\"']", with_src))
    return out


def missing(hook: Hook, lookup: Callable[[str], Any] = resolve) -> list[str]:
    """The names of ``hook`` the installed rsl_rl lacks (``lookup`` resolves ``hook.where``)."""
    try:
        obj = lookup(hook.where)
    except (ImportError, AttributeError) as e:
        return [f"{hook.where} ({e})"]
    if hook.kind == "method":
        return [n for n in hook.names if not callable(getattr(obj, n, None))]
    if hook.kind == "params":
        params = inspect.signature(obj).parameters
        return [n for n in hook.names if n not in params]
    if hook.kind == "calls":
        src = _source(obj)
        return [n for n in hook.names if not re.search(rf"\b{re.escape(n)}\b", src)]
    if hook.kind == "assigns":
        have = _assigned(obj)
        return [n for n in hook.names if n not in have]
    if hook.kind == "buffers":
        have = {name for name, _ in obj(**dict(hook.make)).named_buffers()}
        return [n for n in hook.names if n not in have]
    raise ValueError(f"unknown hook kind {hook.kind!r}")


def installed_version() -> str:
    """The installed rsl-rl-lib's version ("unknown" without its metadata)."""
    try:
        return importlib.metadata.version("rsl-rl-lib")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def problems(hooks: tuple[Hook, ...] = HOOKS, lookup: Callable[[str], Any] = resolve) -> list[str]:
    """One line per hook the installed rsl_rl does not have as gmiexp uses it (empty: every hook holds)."""
    out = []
    for hook in hooks:
        gone = missing(hook, lookup)
        if gone:
            out.append(f"{hook.where}: {hook.kind} {', '.join(gone)} not found; {hook.why}")
    return out


def require() -> None:
    """Raise naming every hook the installed rsl_rl changed (a run would otherwise train differently, silently)."""
    bad = problems()
    if bad:
        raise RuntimeError(f"rsl-rl-lib {installed_version()} changed {len(bad)} internal(s) gmiexp relies on "
                           f"(checked against {', '.join(CHECKED)}; gmiexp.rl.rslrl.hooks):\n  " + "\n  ".join(bad))
