"""Import an rl-games params YAML into gmiexp's config: ``train=rlgames train.file=<path>``.

Users arrive with rl-games configs tuned over many runs. The import happens at compose time
through an OmegaConf resolver: ``conf/train/rlgames.yaml`` sets every field it maps to
``${rlgames:<gmiexp key>}``, so a command-line override (applied after the defaults list) still
wins, and ``--cfg job --resolve`` shows the imported values. Every key of the file is mapped onto
a gmiexp field, or is one whose value gmiexp already passes to rl-games, or is refused (exit 2,
naming the key): nothing is dropped silently. A key the file leaves out takes rl-games' own
default, so the params gmiexp hands rl-games (:func:`gmiexp.rl.rlgames.params.build_params`) are the file's.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from gmiexp.errors import ConfigError, invalid

RESOLVER = "rlgames"
SHIPPED = "rl_games:"  # prefix of a config shipped inside the installed rl-games package
REQUIRED = "<required>"  # rl-games itself fails without the key
KEEP = "<gmiexp default>"  # no rl-games equivalent of "unset": gmiexp's schema default stands


def _float(v: Any) -> float:
    return float(v)  # PyYAML reads 3e-4 (no dot) as a string; rl-games float()s it too


def _lr_schedule(v: Any) -> str:
    if v in (None, "None", "identity"):
        return "identity"  # rl-games: anything but adaptive/linear is the identity schedule
    if v in ("adaptive", "linear"):
        return str(v)
    raise invalid("params.config.lr_schedule", v, ("adaptive", "linear", "None"))


def _bounds_coef(v: Any) -> float:
    return 0.0 if v is None else float(v)  # None: no bounds loss; 0.0 adds exactly nothing


def _same(v: Any) -> Any:
    return v


@dataclass(frozen=True)
class Field:
    """One rl-games key (dotted, under ``params``) and the gmiexp key it becomes."""

    src: str
    dst: str
    default: Any = REQUIRED  # used when the file leaves the key out: rl-games' own default
    convert: Callable[[Any], Any] = _same


FIELDS: tuple[Field, ...] = (
    Field("seed", "seed", KEEP, int),
    Field("config.name", "task.name"),
    Field("config.env_config.env_name", "task.env_id"),
    Field("config.reward_shaper.scale_value", "task.reward_scale", 1.0, _float),
    Field("config.num_actors", "num_envs", REQUIRED, int),
    Field("config.max_epochs", "max_iterations", KEEP, int),
    Field("network.mlp.units", "task.mlp_units", REQUIRED, list),
    Field("network.mlp.activation", "train.activation"),
    Field("network.mlp.initializer", "task.mlp_initializer", REQUIRED, dict),
    Field("network.space.continuous.mu_activation", "task.mu_activation", REQUIRED, str),
    Field("network.space.continuous.sigma_activation", "task.sigma_activation", REQUIRED, str),
    Field("network.space.continuous.mu_init", "task.mu_init", REQUIRED, dict),
    Field("network.space.continuous.sigma_init", "task.sigma_init", REQUIRED, dict),
    Field("network.space.continuous.fixed_sigma", "task.fixed_sigma", REQUIRED, bool),
    Field("config.normalize_input", "train.normalize_input", REQUIRED, bool),
    Field("config.normalize_value", "train.normalize_value", False, bool),
    Field("config.normalize_advantage", "train.normalize_advantage", REQUIRED, bool),
    Field("config.value_bootstrap", "train.value_bootstrap", True, bool),
    Field("config.mixed_precision", "train.mixed_precision", False, bool),
    Field("config.gamma", "train.gamma", REQUIRED, _float),
    Field("config.tau", "train.tau", REQUIRED, _float),
    Field("config.learning_rate", "train.learning_rate", REQUIRED, _float),
    Field("config.lr_schedule", "train.lr_schedule", REQUIRED, _lr_schedule),
    Field("config.kl_threshold", "train.kl_threshold", KEEP, _float),  # read only by the adaptive schedule
    Field("config.grad_norm", "train.grad_norm", REQUIRED, _float),
    Field("config.truncate_grads", "train.truncate_grads", False, bool),
    Field("config.entropy_coef", "train.entropy_coef", REQUIRED, _float),
    Field("config.e_clip", "train.e_clip", REQUIRED, _float),
    Field("config.clip_value", "train.clip_value", REQUIRED, bool),
    Field("config.use_smooth_clamp", "train.use_smooth_clamp", False, bool),
    Field("config.bound_loss_type", "train.bound_loss_type", "bound", str),
    Field("config.bounds_loss_coef", "train.bounds_loss_coef", None, _bounds_coef),
    Field("config.horizon_length", "train.horizon_length", REQUIRED, int),
    Field("config.minibatch_size", "train.minibatch_size", REQUIRED, int),
    Field("config.mini_epochs", "train.mini_epochs", REQUIRED, int),
    Field("config.critic_coef", "train.critic_coef", REQUIRED, _float),
    Field("config.score_to_win", "train.score_to_win", None, lambda v: None if v is None else float(v)),
    Field("config.save_frequency", "train.save_frequency", 0, int),
    Field("config.print_stats", "train.print_stats", KEEP, bool),  # rl-games prints on stdout; gmiexp's bar
    Field("config.torch_compile", "train.torch_compile", KEEP, bool),  # rl-games 1.6.5 compiles unless told not
    Field("config.player.games_num", "eval.episodes", KEEP, int),
    Field("config.player.deterministic", "eval.deterministic", True, bool),
    Field("config.player.render", "eval.video", False, bool),
)

# Keys gmiexp derives from the file rather than copying one value (checked in :func:`_task`).
DERIVED = {
    "algo.name": "a2c_continuous or a2c_discrete, as the task's action space",
    "model.name": "continuous_a2c_logstd or discrete_a2c, as the task's action space",
    "config.env_name": "envpool (rl-games' envpool vec-env: gmiexp's envpool simulator)",
    "config.env_config.seed": "equal to params.seed (gmiexp seeds GMI i's simulator with seed + 1000 i)",
    "config.env_config.max_episode_steps": "the episode length (task.max_episode_length)",
    "network.space.discrete": "a discrete action space",
}
DERIVED_DST = ("task.simulator", "task.continuous", "task.max_episode_length")

# Keys whose only value gmiexp can honour is the one it already passes to rl-games.
FIXED: dict[str, Any] = {
    "network.name": "actor_critic",
    "network.separate": False,
    "network.mlp.d2rl": False,
    "network.mlp.regularizer": {"name": "None"},
    "config.ppo": True,
    "config.multi_gpu": False,
}
# Values that are one whole leaf though they are mappings.
DICT_LEAVES = {"network.mlp.initializer", "network.mlp.regularizer", "network.space.continuous.mu_init",
               "network.space.continuous.sigma_init", "network.space.discrete"}
BY_SRC = {f.src: f for f in FIELDS}
BY_DST = {f.dst: f for f in FIELDS}
KNOWN = set(BY_SRC) | set(DERIVED) | set(FIXED)


def locate(spec: str) -> Path:
    """A path, or ``rl_games:<path inside the installed rl-games package>``."""
    if not spec:
        raise ConfigError("train=rlgames needs train.file=<rl-games YAML path, or "
                          "rl_games:configs/mujoco/ant_envpool.yaml for one shipped with rl-games>")
    if spec.startswith(SHIPPED):
        import importlib.resources

        path = Path(str(importlib.resources.files("rl_games"))) / spec[len(SHIPPED):]
    else:
        path = Path(spec).expanduser()
    if not path.is_file():
        raise invalid("train.file", spec, "an rl-games params YAML file (a path, or rl_games:configs/...)")
    return path.resolve()


def load_params(path: Path) -> dict[str, Any]:
    """The ``params`` block of an rl-games YAML (as rl-games' own runner reads it)."""
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid train.file={path}: not YAML ({e})") from e
    if not isinstance(doc, dict) or set(doc) != {"params"} or not isinstance(doc["params"], dict):
        keys = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise ConfigError(f"invalid train.file={path}: an rl-games YAML holds one top-level key, params (got {keys})")
    return doc["params"]


def leaves(node: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) for every leaf of the file, mappings in :data:`DICT_LEAVES` kept whole."""
    for k, v in node.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and key not in DICT_LEAVES:
            yield from leaves(v, key + ".")
        else:
            yield key, v


def check_keys(flat: dict[str, Any], path: Path) -> None:
    """Refuse every key gmiexp cannot honour (exit 2), naming it and the keys valid beside it."""
    for key, value in flat.items():
        if key not in KNOWN:
            parent = key.rpartition(".")[0]
            under = f"{parent}." if parent else ""
            siblings = sorted({k[len(under):].split(".")[0] for k in KNOWN if k.startswith(under)})
            raise ConfigError(f"invalid key params.{key} in {path}: gmiexp cannot honour it; "
                              f"valid under params{'.' + parent if parent else ''}: {', '.join(siblings) or '-'}")
        if key in FIXED and value != FIXED[key]:
            raise ConfigError(f"invalid params.{key}={value!r} in {path}: gmiexp supports only {FIXED[key]!r}")


def _task(flat: dict[str, Any], path: Path) -> dict[str, Any]:
    """The simulator, action space and episode length the file's environment means for gmiexp."""
    env_name = flat.get("config.env_name")
    if env_name != "envpool":
        raise invalid(f"params.config.env_name in {path}", env_name, ("envpool",))
    env_id = flat.get("config.env_config.env_name")
    import envpool

    if env_id not in envpool.list_all_envs():
        raise invalid(f"params.config.env_config.env_name in {path}", env_id, "an envpool task id, e.g. Ant-v4")
    spec = envpool.make_spec(env_id)
    continuous = spec.action_space.__class__.__name__ == "Box"
    if not continuous:
        raise invalid(f"params.config.env_config.env_name in {path}", env_id,
                      "a continuous-action envpool task (gmiexp's envpool simulator): Ant-v4, Humanoid-v4, ...")
    expect = {"algo.name": "a2c_continuous", "model.name": "continuous_a2c_logstd"}
    for key, want in expect.items():
        if flat.get(key) != want:
            raise invalid(f"params.{key} in {path} (task {env_id})", flat.get(key), (want,))
    if "network.space.discrete" in flat:
        raise ConfigError(f"invalid params.network.space.discrete in {path}: task {env_id} has continuous actions")
    seed, env_seed = flat.get("seed"), flat.get("config.env_config.seed")
    if env_seed is not None and env_seed != seed:
        raise ConfigError(f"invalid params.config.env_config.seed={env_seed} in {path}: gmiexp seeds the simulator "
                          f"with params.seed ({seed}) + 1000 x GMI id; set them equal")
    length = flat.get("config.env_config.max_episode_steps", spec.config.max_episode_steps)
    return {"task.simulator": "envpool", "task.continuous": continuous, "task.max_episode_length": int(length)}


def import_file(path: Path) -> dict[str, Any]:
    """Every gmiexp key ``conf/train/rlgames.yaml`` interpolates -> its value for this file."""
    return dict(_import_cached(str(path), path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=8)
def _import_cached(path_str: str, _mtime_ns: int) -> tuple[tuple[str, Any], ...]:
    path = Path(path_str)
    flat = dict(leaves(load_params(path)))
    check_keys(flat, path)
    out: dict[str, Any] = _task(flat, path)
    for f in FIELDS:
        if f.src in flat:
            try:
                out[f.dst] = f.convert(flat[f.src])
            except ConfigError:
                raise
            except (TypeError, ValueError) as e:
                raise invalid(f"params.{f.src} in {path}", flat[f.src], f"a value for {f.dst} ({e})") from e
        elif f.default is REQUIRED:
            raise ConfigError(f"invalid {path}: params.{f.src} is missing and rl-games requires it")
        elif f.default is KEEP:
            out[f.dst] = schema_default(f.dst)
        else:
            out[f.dst] = f.convert(f.default)
    return tuple(out.items())


def schema_default(dst: str) -> Any:
    """Gmiexp's own default for a dotted config key (from the dataclass schemas)."""
    from gmiexp.config import Config, EvalConfig, TaskConfig, TrainConfig

    group, _, name = dst.rpartition(".")
    schema = {"": Config, "train": TrainConfig, "task": TaskConfig, "eval": EvalConfig}[group]
    f = {x.name: x for x in dataclasses.fields(schema)}[name]
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


def rlgames_value(key: str, *, _root_: Any) -> Any:
    """The ``${rlgames:key}`` resolver: ``key``'s value imported from ``train.file``."""
    values = import_file(locate(str(_root_.train.file)))
    if key not in values:
        raise ConfigError(f"${{rlgames:{key}}}: not a key the importer maps; valid: {', '.join(sorted(values))}")
    return values[key]


def register_resolver() -> None:
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, rlgames_value)


def check_file_used(cfg: Any) -> None:
    """``train.file`` without ``train=rlgames`` would be ignored: refuse it (CLI runs, where Hydra says)."""
    from hydra.core.hydra_config import HydraConfig

    if cfg.train.file and HydraConfig.initialized():
        choice = HydraConfig.get().runtime.choices.get("train")
        if choice != "rlgames":
            raise ConfigError(f"invalid train.file={cfg.train.file!r} with train={choice}: "
                              "the file is read only with train=rlgames")


def unwrap(exc: BaseException) -> BaseException:
    """The gmiexp error behind OmegaConf's wrapping of a resolver failure (or ``exc`` itself)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConfigError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return exc
