"""The one table between rl-games' ``params`` keys and gmiexp's config fields, read both ways.

Import (:mod:`gmiexp.config.rlgames_yaml`, ``train=rlgames train.file=...``): a file's key sets the gmiexp field
its :class:`Field` names (``convert``; ``default`` when the file leaves the key out). Export
(:func:`gmiexp.rl.rlgames.params.build_params`): :func:`export` writes each field's value back under its rl-games key
(``export``), with the values gmiexp fixes (:data:`FIXED`) and the mappings passed verbatim (:data:`VERBATIM`). So a
file imported and then handed to rl-games gives rl-games the file's own values (``tests/config/test_rlgames_yaml.py``
round-trips rl-games' shipped files); a key added here is read and written at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from gmiexp.config.checks import Block, declared
from gmiexp.config.schema import RLGAMES_CONFIG_KEYS, TaskConfig
from gmiexp.errors import invalid

REQUIRED = "<required>"  # rl-games itself fails without the key
KEEP = "<gmiexp default>"  # no rl-games equivalent of "unset": gmiexp's schema default stands


def _float(v: Any) -> float:
    return float(v)  # PyYAML reads 3e-4 (no dot) as a string; rl-games float()s it too


def _lr_schedule(v: Any) -> str:
    if v in (None, "None", "none", "identity"):
        return "identity"  # rl-games: anything but adaptive/linear is the identity schedule
    if v in ("adaptive", "linear"):
        return str(v)
    raise invalid("params.config.lr_schedule", v, ("adaptive", "linear", "None"))


def _lr_schedule_out(v: str) -> str | None:
    return None if v == "identity" else v  # rl-games' own spelling of no schedule


def _bounds_coef(v: Any) -> float:
    return 0.0 if v is None else float(v)  # None: no bounds loss; 0.0 adds exactly nothing


def _optional_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _torch_threads(v: Any) -> int | None:
    """rl-games' ``auto`` (min(4, cores per rank)) and ``0`` (torch's default) -> None: the GMI's core budget."""
    if v in ("auto", 0, None):
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError("auto, 0 or a thread count >= 1")
    return v


def _same(v: Any) -> Any:
    return v


def _plain(v: Any) -> Any:
    """A value as rl-games gets it: mappings and sequences as fresh dicts and lists (rl-games may change them)."""
    if isinstance(v, Mapping):
        return dict(v)
    if isinstance(v, Sequence) and not isinstance(v, str):
        return list(v)
    return v


@dataclass(frozen=True)
class Field:
    """One rl-games key (dotted, under ``params``) and the gmiexp key (dotted) it is, both ways."""

    src: str
    dst: str
    default: Any = REQUIRED  # import: used when the file leaves the key out (rl-games' own default)
    convert: Callable[[Any], Any] = _same  # import: the file's value -> gmiexp's
    continuous_only: bool = False  # a key of continuous actions only: required (import) and written (export) only then
    export: Callable[[Any], Any] | None = _plain  # gmiexp's value -> rl-games'; None: not in the params rl-games trains
    optional: bool = False  # export: written only when set (not None, not an empty mapping)


FIELDS: tuple[Field, ...] = (
    Field("seed", "seed", KEEP, int),
    Field("torch_threads", "train.torch_threads", "auto", _torch_threads),  # exported: the GMI's own thread count
    Field("config.name", "task.name"),
    Field("config.reward_shaper.scale_value", "task.reward_scale", 1.0, _float),
    Field("config.num_actors", "num_envs", REQUIRED, int),  # exported: the GMI's own environments
    Field("config.max_epochs", "max_iterations", KEEP, int),
    Field("network.separate", "task.separate", False, bool),
    Field("network.cnn", "task.cnn", {}, dict, optional=True),
    Field("network.rnn", "task.rnn", {}, dict, optional=True),
    Field("network.mlp.units", "task.mlp_units", REQUIRED, list),
    Field("network.mlp.activation", "train.activation"),
    Field("network.mlp.initializer", "task.mlp_initializer", REQUIRED, dict),
    Field("network.space.continuous.mu_activation", "task.mu_activation", REQUIRED, str, True),
    Field("network.space.continuous.sigma_activation", "task.sigma_activation", REQUIRED, str, True),
    Field("network.space.continuous.mu_init", "task.mu_init", REQUIRED, dict, True),
    Field("network.space.continuous.sigma_init", "task.sigma_init", REQUIRED, dict, True),
    Field("network.space.continuous.fixed_sigma", "task.fixed_sigma", REQUIRED, bool, True),
    Field("config.normalize_input", "train.normalize_input", REQUIRED, bool),
    Field("config.normalize_value", "train.normalize_value", False, bool),
    Field("config.normalize_advantage", "train.normalize_advantage", REQUIRED, bool),
    Field("config.value_bootstrap", "train.value_bootstrap", True, bool),
    Field("config.mixed_precision", "train.mixed_precision", False, bool),
    Field("config.gamma", "train.gamma", REQUIRED, _float),
    Field("config.tau", "train.tau", REQUIRED, _float),
    Field("config.learning_rate", "train.learning_rate", REQUIRED, _float),
    Field("config.lr_schedule", "train.lr_schedule", REQUIRED, _lr_schedule, export=_lr_schedule_out),
    Field("config.kl_threshold", "train.kl_threshold", KEEP, _float),  # read only by the adaptive schedule
    Field("config.grad_norm", "train.grad_norm", REQUIRED, _float),
    Field("config.truncate_grads", "train.truncate_grads", False, bool),
    Field("config.entropy_coef", "train.entropy_coef", REQUIRED, _float),
    Field("config.e_clip", "train.e_clip", REQUIRED, _float),
    Field("config.clip_value", "train.clip_value", REQUIRED, bool),
    Field("config.use_smooth_clamp", "train.use_smooth_clamp", False, bool),
    Field("config.bound_loss_type", "train.bound_loss_type", "bound", str, True),
    Field("config.bounds_loss_coef", "train.bounds_loss_coef", None, _bounds_coef, True),
    Field("config.horizon_length", "train.horizon_length", REQUIRED, int),
    Field("config.minibatch_size", "train.minibatch_size", REQUIRED, int),  # exported: the size that fits the GMI
    Field("config.mini_epochs", "train.mini_epochs", REQUIRED, int),
    Field("config.critic_coef", "train.critic_coef", REQUIRED, _float),
    Field("config.seq_length", "train.seq_length", 4, int),
    Field("config.score_to_win", "train.score_to_win", None, _optional_float, optional=True),
    Field("config.save_frequency", "train.save_frequency", 0, int),
    Field("config.print_stats", "train.print_stats", KEEP, bool),  # rl-games prints on stdout; gmiexp's bar
    Field("config.torch_compile", "train.torch_compile", KEEP, bool),  # rl-games 1.6.5 compiles unless told not
    # the player's: mode=eval reads them from gmiexp's config, not from the params rl-games trains with
    Field("config.player.games_num", "eval.episodes", KEEP, int, export=None),
    Field("config.player.deterministic", "eval.deterministic", True, bool, export=None),
    Field("config.player.render", "eval.video", False, bool, export=None),
)
BY_SRC = {f.src: f for f in FIELDS}


@dataclass(frozen=True)
class Fixed:
    """A key whose only value gmiexp honours (a file's other value is refused), and why."""

    value: Any
    why: str
    passed: bool = True  # export writes it; False: gmiexp leaves the key to rl-games' own default


FIXED: dict[str, Fixed] = {
    "network.mlp.d2rl": Fixed(False, "gmiexp builds rl-games' plain MLP (d2rl: False)"),
    "network.mlp.regularizer": Fixed({"name": "None"}, "rl-games' actor_critic applies no other regularizer"),
    "config.ppo": Fixed(True, "gmiexp runs rl-games' clipped PPO loss (ppo: True), not its plain A2C loss"),
    "config.use_action_masks": Fixed(False, "action masks need a simulator that returns them (SMAC); gmiexp's do "
                                            "not", passed=False),
    # not passed: rl-games' a2c_continuous then reads True (a2c_discrete False); it matters with task.central_value
    "config.use_experimental_cv": Fixed(False, "it applies only to a central value network on the simulator's "
                                               "states", passed=False),
}

#: gmiexp mappings that hold rl-games keys of one block verbatim: gmiexp key -> (rl-games block, the keys the schema
#: admits): the reward shaper beyond the scale, and the keys only rl-games' own agent reads (layout tcg_ex)
VERBATIM: dict[str, tuple[str, tuple[str, ...]]] = {
    "task.reward_shaper": ("config.reward_shaper", cast(Block, declared(TaskConfig)["reward_shaper"]).keys),
    "train.rlgames_config": ("config", RLGAMES_CONFIG_KEYS),
}

#: rl-games' algorithm and model for each action kind (``runner.algo_factory`` / ``model_builder`` names)
ALGO = {"continuous": "a2c_continuous", "discrete": "a2c_discrete", "multi_discrete": "a2c_discrete"}
MODEL = {"continuous": "continuous_a2c_logstd", "discrete": "discrete_a2c", "multi_discrete": "multi_discrete_a2c"}


def _under(src: str, block: str) -> str | None:
    """``src`` relative to ``block`` (``""``: a top-level key of params; ``""`` back: the block itself), or None."""
    if not block:
        return None if "." in src else src
    if src == block:
        return ""
    return src[len(block) + 1:] if src.startswith(block + ".") else None


def _at(out: dict[str, Any], key: str) -> dict[str, Any]:
    """The mapping ``key`` (dotted, ``""``: ``out`` itself) names inside ``out``, created as needed."""
    for k in filter(None, key.split(".")):
        out = out.setdefault(k, {})
    return out


def export(value: Callable[[str], Any], block: str, continuous: bool) -> dict[str, Any]:
    """rl-games' ``params.<block>`` (``""``: params' own top-level keys) from gmiexp's values, ``value(dst)``.

    Every key of :data:`FIELDS` under ``block`` (continuous-only ones with ``continuous`` actions, optional ones
    when set), then the fixed values gmiexp passes (:data:`FIXED`), then the verbatim mappings (:data:`VERBATIM`).
    """
    out: dict[str, Any] = {}
    for f in FIELDS:
        key = _under(f.src, block)
        if key is None or f.export is None or (f.continuous_only and not continuous):
            continue
        v = value(f.dst)
        if f.optional and (v is None or (isinstance(v, Mapping) and not v)):
            continue
        parent, _, leaf = key.rpartition(".")
        _at(out, parent)[leaf] = f.export(v)
    for src, fixed in FIXED.items():
        key = _under(src, block)
        if key is not None and fixed.passed:
            parent, _, leaf = key.rpartition(".")
            _at(out, parent)[leaf] = _plain(fixed.value)
    for dst, (src, _keys) in VERBATIM.items():
        key = _under(src, block)
        if key is not None:
            _at(out, key).update(value(dst))
    return out
