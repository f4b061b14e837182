"""Import an rl-games params YAML into gmiexp's config: ``train=rlgames train.file=<path>``.

Users arrive with rl-games configs tuned over many runs. The import happens at compose time
through an OmegaConf resolver: ``conf/train/rlgames.yaml`` sets every field it maps to
``${rlgames:<gmiexp key>}``, so a command-line override (applied after the defaults list) still
wins, and ``--cfg job --resolve`` shows the imported values. Every key of the file is mapped onto
a gmiexp field (:mod:`gmiexp.config.rlgames_keys`: the one table, which the export to rl-games reads too),
passed to rl-games' agent verbatim (``train.rlgames_config``), honoured with a note
on stderr saying how (a key rl-games itself ignores, a launcher setting gmiexp owns), or refused.
A refusal lists every key gmiexp cannot honour at once (exit 2), blockers first (simulator,
algorithm, network), each with its reason: nothing is dropped silently. A key the file leaves out
takes rl-games' own default, so the params gmiexp hands rl-games
(:func:`gmiexp.rl.rlgames.params.build_params`) are the file's. Environments map through
:mod:`gmiexp.config.rlgames_env`; IsaacGymEnvs' Hydra interpolations through
:mod:`gmiexp.config.rlgames_hydra`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml
from omegaconf import OmegaConf

from gmiexp.config import Config, EvalConfig, TaskConfig, TrainConfig
from gmiexp.config.checks import Block, declared
from gmiexp.config.rlgames_env import map_env
from gmiexp.config.rlgames_hydra import Follows, has_interpolation, resolve
from gmiexp.config.rlgames_keys import ALGO, BY_SRC, FIELDS, FIXED, KEEP, MODEL, REQUIRED, VERBATIM
from gmiexp.errors import ConfigError, invalid, listed

RESOLVER = "rlgames"
SHIPPED = "rl_games:"  # prefix of a config shipped inside the installed rl-games package

#: a key of a verbatim block (:data:`~gmiexp.config.rlgames_keys.VERBATIM`) -> (the gmiexp mapping, its key there)
VERBATIM_SRC = {f"{block}.{k}": (dst, k) for dst, (block, keys) in VERBATIM.items() for k in keys}

# Keys gmiexp derives from the file rather than copying one value (see :func:`_inspect`).
DERIVED = {
    "algo.name": "a2c_continuous or a2c_discrete, as the task's action space",
    "model.name": "continuous_a2c_logstd or discrete_a2c, as the task's action space",
    "network.name": "actor_critic",
    "network.space.continuous": "continuous actions",
    "network.space.discrete": "discrete actions",
    "network.space.multi_discrete": "multi-discrete actions",
    "config.env_name": "the simulator (gmiexp.config.rlgames_env)",
    "config.env_config": "the env id and task.env_config (the simulator's make kwargs)",
    "config.max_frames": "max_iterations (epochs of horizon_length x num_actors steps)",
    "load_checkpoint": "checkpoint=load_path when true",
    "load_path": "checkpoint when load_checkpoint is true",
}
DERIVED_DST = ("task.simulator", "task.env_id", "task.env_config", "task.continuous", "task.max_episode_length",
               *VERBATIM, "checkpoint")

# Keys gmiexp honours by doing what rl-games does with them, said on stderr (value -> None: any value).
NOTES: dict[str, tuple[Any, str]] = {
    "config.full_experiment_name": (None, "gmiexp names rl-games' experiment directory itself "
                                          "(<run dir>/rl_games/run); choose the run directory with hydra.run.dir"),
    "config.device": (None, "gmiexp places each GMI on its own device (train.device, default auto: the GMI's GPU, "
                            "else cpu)"),
    "config.multi_gpu": (True, "gmiexp's GMIs replace rl-games' multi_gpu: num_gpus x gmis_per_gpu GMIs, each "
                               "running num_envs environments, reduce their gradients"),
    "config.seq_len": (None, "rl-games ignores the deprecated seq_len (it reads seq_length); ignored likewise"),
    "config.ignore_dead_batches": (None, "rl-games 1.6.5 does not read it; ignored likewise"),
    "config.player.determenistic": (None, "rl-games 1.6.5 does not read this spelling (it reads "
                                          "player.deterministic); ignored likewise"),
    "config.player.render_sleep": (None, "gmiexp's mode=eval films offscreen (eval.video); no window to pace"),
    "config.player.n_game_life": (None, "gmiexp's mode=eval counts whole episodes as the simulator ends them"),
    "config.player.device_name": (None, "mode=eval runs on train.device"),
    "config.device_name": (None, "mode=eval runs on train.device (rl-games' player reads device_name)"),
    "network.rnn1": (None, "rl-games' actor_critic does not read it (a disabled rnn block); ignored likewise"),
    "network.mlp.normalization": (None, "rl-games' actor_critic does not read it (it reads network.normalization); "
                                        "ignored likewise"),
    "network.mlp.norm_only_first_layer": (None, "no effect without network.normalization, as in rl-games"),
}
#: Why a whole block is refused
BLOCKS = {
    "config.central_value_config": "an asymmetric critic on the simulator's states; gmiexp's central value "
                                   "(task.central_value) serves mjlab's critic observations only",
    "config.rnd_config": "RND curiosity is not run by gmiexp",
    "config.self_play_config": "self-play is not run by gmiexp",
    "env": "Isaac Lab's rl-games wrapper option (observation/action clipping) that gmiexp's simulators do not apply",
    "config.features": "rl-games' runner fills it with Python objects (its algo observer, a soft augmentation); "
                       "gmiexp supplies its own observer",
}
# Values that are one whole leaf though they are mappings.
DICT_LEAVES = {"network.mlp.initializer", "network.mlp.regularizer", "network.space.continuous.mu_init",
               "network.space.continuous.sigma_init", "network.space.discrete", "network.space.multi_discrete",
               "network.cnn", "network.rnn", "network.rnn1", "config.env_config", *BLOCKS}
#: rl-games' actor_critic sub-blocks and the keys it reads in each (network_builder.A2CBuilder): the schema's
NETWORK_BLOCKS = {f"network.{k}": cast(Block, declared(TaskConfig)[k]).keys for k in ("cnn", "rnn")}
#: rl-games agent -> continuous actions, and model -> continuous actions (gmiexp runs no multi-discrete task)
ALGOS = {ALGO[k]: k == "continuous" for k in ("continuous", "discrete")}
MODELS = {MODEL[k]: k == "continuous" for k in ("continuous", "discrete")}

SIMULATOR, ALGORITHM, NETWORK, OTHER = range(4)  # refusal ranks: blockers first
SAC = "SAC is not run by gmiexp (it runs rl-games' PPO agents a2c_continuous and a2c_discrete)"


@dataclass(frozen=True)
class Refusal:
    """One key (and value) of the file gmiexp cannot honour, and why."""

    rank: int
    key: str
    value: Any
    reason: str

    def line(self) -> str:
        return f"params.{self.key}={self.value!r}: {self.reason}"


@dataclass
class Imported:
    """A mapped file: gmiexp key -> value, the notes said on stderr, and what is refused."""

    values: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)

    def refuse(self, rank: int, key: str, value: Any, reason: str) -> None:
        self.refusals.append(Refusal(rank, key, value, reason))

    def error(self, path: Path) -> ConfigError:
        lines = [r.line() for r in sorted(self.refusals, key=lambda r: r.rank)]
        return listed(f"invalid train.file={path}: gmiexp cannot honour {len(lines)} key(s) of this rl-games file "
                      "(nothing was launched)", lines, f"invalid train.file={path}")


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


def load_doc(path: Path) -> dict[str, Any]:
    """The whole rl-games YAML (a ``params`` block and maybe other top-level keys), interpolations resolved."""
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid train.file={path}: not YAML ({e})") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("params"), dict):
        keys = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise ConfigError(f"invalid train.file={path}: not an rl-games params file: rl-games' runner reads its "
                          f"top-level params block (got {keys})")
    if has_interpolation(doc["params"]):
        doc = {**doc, "params": resolve({"params": doc["params"]}, str(path))["params"]}
    return doc


def leaves(node: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) for every leaf of the file, mappings in :data:`DICT_LEAVES` kept whole."""
    for k, v in node.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and key not in DICT_LEAVES:
            yield from leaves(v, key + ".")
        else:
            yield key, v


def _actions(params: dict[str, Any], flat: dict[str, Any], imp: Imported, action_space: str | None) -> bool | None:
    """Continuous (True) or discrete (False) actions, from the file's space, agent and model (None: refused)."""
    algo, model = flat.get("algo.name"), flat.get("model.name")
    if algo == "sac" or model == "soft_actor_critic":
        imp.refuse(ALGORITHM, "algo.name", algo, SAC)
        return None
    space = (params.get("network") or {}).get("space") or {}
    kinds = [k for k in ("continuous", "discrete", "multi_discrete") if k in space]
    continuous = None
    if "multi_discrete" in kinds:
        imp.refuse(NETWORK, "network.space.multi_discrete", space["multi_discrete"],
                   "no gmiexp simulator task has multi-discrete actions")
    elif len(kinds) != 1:
        imp.refuse(NETWORK, "network.space", space, "one of continuous or discrete")
    else:
        continuous = kinds[0] == "continuous"
    if algo not in ALGOS:
        imp.refuse(ALGORITHM, "algo.name", algo, f"not an agent gmiexp runs: {', '.join(ALGOS)}")
    elif continuous is not None and ALGOS[algo] != continuous:
        imp.refuse(ALGORITHM, "algo.name", algo, f"the network's space is {kinds[0]}")
    if model not in MODELS:
        imp.refuse(ALGORITHM, "model.name", model, f"not a model gmiexp builds: {', '.join(MODELS)}")
    elif continuous is not None and MODELS[model] != continuous:
        imp.refuse(ALGORITHM, "model.name", model, f"the network's space is {kinds[0]}")
    if continuous is not None and action_space is not None and (action_space == "Box") != continuous:
        imp.refuse(NETWORK, f"network.space.{kinds[0]}", space[kinds[0]],
                   f"the simulator's task has {action_space} actions")
    return continuous


def _network(flat: dict[str, Any], imp: Imported) -> bool:
    """Refuse a network gmiexp does not build, and keys of a cnn/rnn block rl-games' actor_critic does not read."""
    name = flat.get("network.name")
    if name != "actor_critic":
        why = SAC if name == "soft_actor_critic" else (f"rl-games' {name} is not a network gmiexp builds; it builds "
                                                        "actor_critic (mlp, cnn, rnn)")
        imp.refuse(NETWORK, "network.name", name, why)
        return False
    for block, keys in NETWORK_BLOCKS.items():
        value = flat.get(block)
        if value is None:
            continue
        if not isinstance(value, dict):
            imp.refuse(NETWORK, block, value, "a mapping")
            continue
        for k in sorted(set(value) - set(keys)):
            imp.refuse(NETWORK, f"{block}.{k}", value[k], f"rl-games' actor_critic reads only {', '.join(keys)}")
    return True


def _checkpoint(flat: dict[str, Any], imp: Imported) -> None:
    load = flat.get("load_checkpoint", False)
    if isinstance(load, Follows) or not load:
        imp.values["checkpoint"] = schema_default("checkpoint")  # gmiexp's checkpoint= (IsaacGymEnvs: the same)
        return
    imp.values["checkpoint"] = str(flat.get("load_path", ""))  # rl-games resolves it from the working directory


def _max_frames(flat: dict[str, Any], imp: Imported) -> None:
    """rl-games stops at max_frames env steps (or max_epochs, whichever first): gmiexp counts epochs."""
    frames, actors, horizon = (flat.get(k) for k in ("config.max_frames", "config.num_actors",
                                                     "config.horizon_length"))
    if frames is None or frames == -1:
        return
    if not all(isinstance(v, int) and v > 0 for v in (frames, actors, horizon)):
        imp.refuse(OTHER, "config.max_frames", frames, "needs integer num_actors and horizon_length to count epochs")
        return
    epochs = math.ceil(frames / (actors * horizon))
    if isinstance(imp.values.get("max_iterations"), int) and "config.max_epochs" in flat:
        epochs = min(epochs, imp.values["max_iterations"])
    imp.values["max_iterations"] = epochs
    imp.notes.append(f"params.config.max_frames={frames}: max_iterations={epochs} (epochs of "
                     f"{horizon} x {actors} steps; rl-games stops at whichever of max_frames/max_epochs comes first)")


def _leaf(key: str, value: Any, flat: dict[str, Any], imp: Imported, network_ok: bool, sac: bool) -> None:
    """Map one leaf of the file onto ``imp`` (a field, a verbatim rl-games key, a note or a refusal)."""
    if key in BY_SRC:
        f = BY_SRC[key]
        if isinstance(value, Follows) or (key == "config.num_actors" and value == -1):
            imp.values[f.dst] = schema_default(f.dst)  # the launcher's value: gmiexp's own key
            return
        try:
            imp.values[f.dst] = f.convert(value)
        except ConfigError as e:
            imp.refuse(OTHER, key, value, str(e))
        except (TypeError, ValueError) as e:
            imp.refuse(OTHER, key, value, f"not a value for {f.dst} ({e})")
    elif key in VERBATIM_SRC:
        dst, k = VERBATIM_SRC[key]
        imp.values[dst][k] = value
    elif key in FIXED:
        fixed = FIXED[key]
        if value != fixed.value:
            imp.refuse(OTHER, key, value, f"{fixed.why} (only {fixed.value!r})")
    elif key in NOTES:
        when, why = NOTES[key]
        if when is None or value == when:
            imp.notes.append(f"params.{key}={value!r}: {why}")
    elif key in BLOCKS:
        imp.refuse(OTHER, key, value, BLOCKS[key])
    elif key not in DERIVED:
        if sac:
            why = "a SAC setting (algo.name: sac)"
        elif key.startswith("network.") and not network_ok:
            why = f"a setting of network {flat.get('network.name')!r}, refused above"
        else:
            why = "not a key gmiexp maps or passes to rl-games' PPO agent"
        imp.refuse(NETWORK if key.startswith("network.") else OTHER, key, value, why)


def _inspect(path: Path) -> Imported:
    """Map every key of the file, collecting every refusal (nothing raised for the file's content)."""
    doc = load_doc(path)
    params = doc["params"]
    flat = dict(leaves(params))
    imp = Imported()
    for key in sorted(set(doc) - {"params"}):
        if key == "pbt":  # rl-games master's and Isaac Lab's population-based training section
            imp.notes.append("top-level pbt: population-based training's section, read with pbt=rlgames (docs/pbt.md)")
        else:
            imp.notes.append(f"top-level {key}: rl-games' runner reads only params; ignored likewise")
    env = map_env(flat, path)
    imp.notes += env.notes
    if env.refusal is not None:
        imp.refuse(SIMULATOR, *env.refusal)
    continuous = _actions(params, flat, imp, env.action_space)
    network_ok = _network(flat, imp)
    imp.values.update(env.values)
    for dst in VERBATIM:
        imp.values[dst] = {}
    sac = flat.get("algo.name") == "sac"
    for key, value in flat.items():
        _leaf(key, value, flat, imp, network_ok, sac)
    seed, env_seed = flat.get("seed"), (flat.get("config.env_config") or {}).get("seed")
    if env_seed is not None and env_seed != seed:
        imp.notes.append(f"params.config.env_config.seed={env_seed}: gmiexp seeds every environment from one "
                         f"seed, params.seed ({seed}): environment k of the run takes seed + k, not a separate "
                         "env seed")
    if imp.refusals and min(r.rank for r in imp.refusals) < OTHER:
        return imp  # a blocker: what the rest would map to does not matter
    imp.values["task.continuous"] = continuous
    _checkpoint(flat, imp)
    _max_frames(flat, imp)
    for f in FIELDS:
        if f.dst in imp.values:
            continue
        if f.default is REQUIRED and not (f.continuous_only and not continuous):
            imp.refuse(OTHER, f.src, "<missing>", "rl-games requires it")
        elif f.default in (REQUIRED, KEEP):
            imp.values[f.dst] = schema_default(f.dst)
        else:
            imp.values[f.dst] = f.convert(f.default)
    for dst in DERIVED_DST:  # what the simulator does not set (isaacgym: the episode length) stays gmiexp's
        imp.values.setdefault(dst, schema_default(dst))
    return imp


def inspect_file(path: Path) -> Imported:
    """The whole mapping of a file, refusals included (the config table reads it; nothing is raised)."""
    return _inspect_cached(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _inspect_cached(path_str: str, _mtime_ns: int) -> Imported:
    return _inspect(Path(path_str))


def import_file(path: Path) -> dict[str, Any]:
    """Every gmiexp key ``conf/train/rlgames.yaml`` interpolates -> its value for this file (exit 2 if refused)."""
    imp = inspect_file(path)
    if imp.refusals:
        raise imp.error(path)
    _say_notes(str(path), tuple(imp.notes))
    return dict(imp.values)


@functools.lru_cache(maxsize=8)
def _say_notes(path: str, notes: tuple[str, ...]) -> None:
    """Once per file and process, on stderr: how gmiexp honours keys it does not copy."""
    if notes:
        print(f"gmiexp: imported {path} with notes:\n  " + "\n  ".join(notes), file=sys.stderr)


def schema_default(dst: str) -> Any:
    """Gmiexp's own default for a dotted config key (from the dataclass schemas)."""
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
        if choice not in ("rlgames", "rslrl"):  # rslrl: an rsl_rl runner YAML (gmiexp.rl.rslrl.config)
            raise ConfigError(f"invalid train.file={cfg.train.file!r} with train={choice}: "
                              "the file is read only with train=rlgames (or train=rslrl)")


def unwrap(exc: BaseException) -> BaseException:
    """The gmiexp error behind OmegaConf's wrapping of a resolver failure (or ``exc`` itself)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConfigError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return exc
