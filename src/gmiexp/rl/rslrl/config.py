"""rsl_rl runner configs as users keep them: read, upgraded from the pre-4.0 format, checked, fitted to a GMI.

Light on purpose (YAML, no rsl_rl): the planner checks ``train.file`` with it before anything launches, and the
GMIs build the runner config with it. Keys gmiexp cannot honour are refused together, each with its reason.

Isaac Lab's ``params/agent.yaml`` is its runner configclass through ``class_to_dict`` and ``yaml.dump``: a field
left ``MISSING`` is written ``{}`` (``policy: {}`` in the 3.0 format, ``actor: {}`` in the 2.x one,
``empirical_normalization: {}`` in both), and ``device`` is the device it trained on. mjlab's is ``asdict`` of
its runner dataclass through ``yaml.dump``, tuples tagged ``!!python/tuple``. Both are read as written.
"""

from __future__ import annotations

import copy
import importlib.util
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gmiexp.config.rslrl_keys import RUNNER_KEYS as RSLRL_RUNNER_KEYS
from gmiexp.errors import ConfigError, listed
from gmiexp.rl.rslrl.hooks import installed_version

#: where group rank 0 keeps rsl_rl's checkpoints (``model_<it>.pt``) and TensorBoard log, under the run dir
CHECKPOINT_DIR = "rsl_rl"
#: the role ``train=rslrl`` selects (conf/train/rslrl.yaml)
ROLE = "rslrl"

#: runner keys gmiexp passes to rsl_rl (or reads itself)
RUNNER_KEYS = frozenset(RSLRL_RUNNER_KEYS)
#: keys refused whatever their value, with the reason
REFUSED = {
    "multi_gpu": "gmiexp owns the process group: its GMIs reduce through the Plan's reduction",
    "distillation": "distillation (a student-teacher runner) is not supported; train a PPO teacher first",
    "teacher": "distillation (a student-teacher runner) is not supported",
    "student": "distillation (a student-teacher runner) is not supported",
}
RUNNERS = ("OnPolicyRunner", "rsl_rl.runners:OnPolicyRunner", "MjlabOnPolicyRunner")
ALGORITHMS = ("PPO", "rsl_rl.algorithms:PPO", "rsl_rl.algorithms.PPO")
ALGORITHM_KEYS = frozenset({
    "class_name", "num_learning_epochs", "num_mini_batches", "learning_rate", "schedule", "gamma", "lam",
    "entropy_coef", "desired_kl", "max_grad_norm", "value_loss_coef", "use_clipped_value_loss", "clip_param",
    "normalize_advantage_per_mini_batch", "optimizer", "share_cnn_encoders", "rnd_cfg", "symmetry_cfg",
})
#: PPO keys a later rsl-rl-lib in pyproject's range added: key -> the release. ``use_mixed_precision`` (bfloat16
#: autocast of the update's forward passes) reaches rsl_rl's PPO; ``grad_reduce_bucket_mb`` too, where it changes
#: nothing: in GMIs the Plan's reduction carries the gradients (``GMIPPO.reduce_parameters``), not rsl_rl's buckets
LATER_ALGORITHM_KEYS: dict[str, tuple[int, ...]] = {"use_mixed_precision": (5, 5), "grad_reduce_bucket_mb": (5, 5)}
#: where a runner config was trained (Isaac Lab's ``device``, default ``cuda:0``): taken as the user's record, not
#: a setting; the GMIs train on the Plan's devices (train.device), whatever GPU index or host it names
TRAINED_DEVICE = "device"
#: the pre-4.0 ``policy`` block's keys, mapped onto the current ``actor``/``critic`` models
LEGACY_POLICY_KEYS = frozenset({
    "class_name", "init_noise_std", "noise_std_type", "state_dependent_std", "actor_hidden_dims",
    "critic_hidden_dims", "activation", "actor_obs_normalization", "critic_obs_normalization",
})
#: the recurrent one's too (Isaac Lab's ``RslRlPpoActorCriticRecurrentCfg``)
LEGACY_RNN_KEYS = frozenset({"rnn_type", "rnn_hidden_dim", "rnn_num_layers"})
#: pre-4.0 policy class -> the current model class its actor and critic become
LEGACY_POLICIES = {"ActorCritic": "MLPModel", "ActorCriticRecurrent": "RNNModel"}
#: Isaac Lab's model keys of rsl_rl 4.x (``stochastic`` and the noise), which rsl_rl 5 replaced by
#: ``distribution_cfg``; upgraded as Isaac Lab's ``handle_deprecated_rsl_rl_cfg`` does for rsl_rl >= 5
STOCHASTIC_KEYS = ("stochastic", "init_noise_std", "noise_std_type", "state_dependent_std")
#: config entries rsl_rl imports as ``module:function`` (Isaac Lab writes callables so): they must import here
CALLABLES = (("algorithm", "symmetry_cfg", "data_augmentation_func"),)
#: the current format's defaults where a file leaves them out (rsl_rl's own: MLP actor with a scalar Gaussian)
DEFAULTS: dict[str, Any] = {"num_steps_per_env": 24, "save_interval": 50, "obs_groups": {},
                            "actor": {"class_name": "MLPModel",
                                      "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0,
                                                           "std_type": "scalar"}},
                            "critic": {"class_name": "MLPModel"}, "algorithm": {"class_name": "PPO"}}


class _AgentYamlLoader(yaml.SafeLoader):
    """``yaml.safe_load`` plus ``!!python/tuple`` as a list: mjlab's ``dump_yaml`` writes its tuples so."""


_AgentYamlLoader.add_constructor("tag:yaml.org,2002:python/tuple",
                                 lambda loader, node: loader.construct_sequence(node, deep=True))


def read_file(path: str | Path) -> dict[str, Any]:
    """An rsl_rl runner config from YAML: a plain runner dict or Isaac Lab's / mjlab's ``params/agent.yaml``."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"invalid train.file: {str(path)!r}; valid: an rsl_rl runner config YAML that exists")
    try:
        data = yaml.load(p.read_text(), Loader=_AgentYamlLoader)  # noqa: S506 (safe_load plus tuples)
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid train.file: {str(path)!r}; not YAML ({e})") from e
    if not isinstance(data, dict):
        raise ConfigError(f"invalid train.file: {str(path)!r}; valid: a mapping of rsl_rl runner keys")
    return data


def strip_missing(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` less every ``{}`` at any depth: Isaac Lab's ``MISSING`` as ``class_to_dict`` writes it.

    No rsl_rl setting is an empty mapping (``obs_groups: {}`` is rsl_rl's default as well), so the key is taken
    as absent, as Isaac Lab's own loader treats a ``MISSING`` field.
    """
    return {k: strip_missing(v) if isinstance(v, Mapping) else copy.deepcopy(v)
            for k, v in cfg.items() if not (isinstance(v, Mapping) and not v)}


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, nested mappings merged key by key (neither is modified)."""
    out = copy.deepcopy(dict(base))
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else copy.deepcopy(v)
    return out


def distribution(init_std: float, std_type: str, state_dependent: bool) -> dict[str, Any]:
    """rsl_rl 5's ``distribution_cfg`` for the older noise keys (a state-dependent std: the heteroscedastic one)."""
    name = "HeteroscedasticGaussianDistribution" if state_dependent else "GaussianDistribution"
    return {"class_name": name, "init_std": float(init_std), "std_type": std_type}


def upgrade_stochastic(model: Mapping[str, Any]) -> dict[str, Any]:
    """An Isaac Lab model config of rsl_rl 4.x (``stochastic``, ``init_noise_std``, ...) with rsl_rl 5's keys.

    As Isaac Lab's ``handle_deprecated_rsl_rl_cfg`` migrates it for rsl_rl >= 5: a stochastic model without a
    ``distribution_cfg`` gets a Gaussian one from the noise keys; the four keys go either way.
    """
    out = {k: copy.deepcopy(v) for k, v in model.items() if k not in STOCHASTIC_KEYS}
    if out.get("distribution_cfg") is None and model.get("stochastic") is True:
        out["distribution_cfg"] = distribution(model.get("init_noise_std", 1.0), model.get("noise_std_type", "scalar"),
                                               bool(model.get("state_dependent_std", False)))
    return out


def legacy_models(policy: Mapping[str, Any], norm: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The actor and critic a pre-4.0 ``policy`` block stands for (Isaac Lab's ``handle_deprecated_rsl_rl_cfg``)."""
    kind = LEGACY_POLICIES.get(policy.get("class_name", "ActorCritic"), "MLPModel")
    act = policy.get("activation", "elu")
    rnn = {k: policy[k] for k in sorted(LEGACY_RNN_KEYS) if k in policy}
    actor = {"class_name": kind, "hidden_dims": list(policy.get("actor_hidden_dims", [256, 256, 256])),
             "activation": act,
             "obs_normalization": bool(policy.get("actor_obs_normalization", bool(norm))),
             "distribution_cfg": distribution(policy.get("init_noise_std", 1.0),
                                              policy.get("noise_std_type", "scalar"),
                                              bool(policy.get("state_dependent_std", False))), **rnn}
    critic = {"class_name": kind, "hidden_dims": list(policy.get("critic_hidden_dims", [256, 256, 256])),
              "activation": act,
              "obs_normalization": bool(policy.get("critic_obs_normalization", bool(norm))), **rnn}
    return actor, critic


def upgrade_legacy(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A runner config in the current format: Isaac Lab's ``MISSING`` fields dropped, older formats upgraded.

    What Isaac Lab's ``handle_deprecated_rsl_rl_cfg`` does for rsl_rl >= 5: the pre-4.0 ``policy`` block
    (``ActorCritic``, ``ActorCriticRecurrent``) becomes ``actor``/``critic`` models (hidden sizes, activation, the
    noise as a Gaussian, the recurrent layers), ``empirical_normalization`` turns on both models' observation
    normalisers, and rsl_rl 4.x's ``stochastic`` model keys become a ``distribution_cfg``.
    """
    out = strip_missing(cfg)
    policy = out.pop("policy", None)
    norm = out.pop("empirical_normalization", None)
    if isinstance(policy, Mapping):
        actor, critic = legacy_models(policy, norm)
        out["actor"] = merge(actor, out.get("actor", {}))
        out["critic"] = merge(critic, out.get("critic", {}))
    elif norm is not None:
        for m in ("actor", "critic"):
            out.setdefault(m, {}).setdefault("obs_normalization", bool(norm))
    for m in ("actor", "critic"):
        if isinstance(out.get(m), Mapping) and any(k in out[m] for k in STOCHASTIC_KEYS):
            out[m] = upgrade_stochastic(out[m])
    return out


def unimportable(cfg: Mapping[str, Any]) -> list[str]:
    """The ``module:function`` entries rsl_rl would import that cannot be imported here, each with its reason.

    Isaac Lab writes a symmetry function as text (``isaaclab_tasks....:compute_symmetric_states``); rsl_rl
    imports it in every GMI, so a module this environment lacks is refused before launch (found, not imported).
    """
    out = []
    for path in CALLABLES:
        node: Any = cfg
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if not isinstance(node, str) or ":" not in node:
            continue
        module = node.split(":", 1)[0]
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package that is missing
            found = False
        if not found:
            out.append(f"{'.'.join(path)}: {node!r}; its module {module!r} is not importable here (rsl_rl imports "
                       f"it in every GMI: install the package that has it, e.g. Isaac Lab's task package, or "
                       f"point it at a function of your own)")
    return out


def problems(cfg: Mapping[str, Any], trained_device: bool = True) -> list[str]:
    """Every key of ``cfg`` gmiexp cannot honour, each with its reason (empty: all honoured).

    ``trained_device``: ``device`` is the device a saved config trained on (a file or a recipe), not a setting;
    in ``train.rslrl`` overrides it is refused, naming ``train.device``.
    """
    cfg = strip_missing(cfg)
    out = [f"{k}: {why}" for k, why in REFUSED.items() if cfg.get(k) is not None]
    if not trained_device and cfg.get(TRAINED_DEVICE) is not None:
        out.append(f"{TRAINED_DEVICE}: the GMIs' device is train.device (and the Plan), not an rsl_rl key")
    known = RUNNER_KEYS | {TRAINED_DEVICE}
    out += [f"{k}: not an rsl_rl OnPolicyRunner key (known: {', '.join(sorted(known))})"
            for k in cfg if k not in known and k not in REFUSED]
    runner = cfg.get("class_name")
    if runner is not None and str(runner).rsplit(":", 1)[-1].rsplit(".", 1)[-1] not in (*RUNNERS, "OnPolicyRunner"):
        out.append(f"class_name: {runner!r}; gmiexp runs rsl_rl's OnPolicyRunner (valid: {', '.join(RUNNERS)})")
    out += legacy_problems(cfg.get("policy"))
    algo = cfg.get("algorithm", {}) or {}
    name = algo.get("class_name", "PPO")
    if name not in ALGORITHMS:
        out.append(f"algorithm.class_name: {name!r}; valid: {', '.join(ALGORITHMS)} (gmiexp reduces PPO's "
                   "gradients; Distillation is not supported)")
    out += algorithm_key_problems(algo)
    if algo.get("schedule", "adaptive") not in ("adaptive", "fixed"):
        out.append(f"algorithm.schedule: {algo['schedule']!r}; valid: adaptive, fixed")
    return out + unimportable(cfg)


def installed_release() -> tuple[int, ...] | None:
    """The installed rsl-rl-lib's release as numbers (``5.5.1`` -> (5, 5, 1)); None when it is not installed."""
    numbers = re.findall(r"\d+", installed_version())[:3]
    return tuple(int(x) for x in numbers) if numbers else None


def algorithm_key_problems(algo: Mapping[str, Any], release: tuple[int, ...] | None = None) -> list[str]:
    """``algorithm`` keys rsl_rl's PPO does not take: unknown ones, and those of a release later than the installed."""
    release = installed_release() if release is None else release
    known = ALGORITHM_KEYS | {k for k, r in LATER_ALGORITHM_KEYS.items() if release is None or release >= r}
    out = []
    for k in algo:
        if k in known:
            continue
        if k in LATER_ALGORITHM_KEYS:
            need = ".".join(map(str, LATER_ALGORITHM_KEYS[k]))
            have = ".".join(map(str, release or ()))
            out.append(f"algorithm.{k}: rsl-rl-lib {need} added it, the installed one is {have} (valid: "
                       f"rsl-rl-lib>={need} as Isaac Lab 3.0 installs it, or leave the key out)")
        else:
            out.append(f"algorithm.{k}: not an rsl_rl PPO key (known: {', '.join(sorted(known))})")
    return out


def legacy_problems(policy: Any) -> list[str]:
    """What a pre-4.0 ``policy`` block holds that has no current actor/critic model (a student-teacher policy)."""
    if not isinstance(policy, Mapping):
        return []
    name = policy.get("class_name", "ActorCritic")
    out = [] if name in LEGACY_POLICIES else [
        f"policy.class_name: {name!r}; the pre-4.0 format is imported for {', '.join(LEGACY_POLICIES)} only (a "
        "student-teacher policy: distillation is not supported)"]
    keys = LEGACY_POLICY_KEYS | (LEGACY_RNN_KEYS if LEGACY_POLICIES.get(name) == "RNNModel" else frozenset())
    return out + [f"policy.{k}: not a pre-4.0 {LEGACY_POLICIES.get(name) and name or 'ActorCritic'} key"
                  for k in policy if k not in keys]


def check(cfg: Mapping[str, Any], source: str, trained_device: bool = True) -> None:
    """Refuse ``cfg`` (exit 2) naming every key gmiexp cannot honour, all at once."""
    bad = problems(cfg, trained_device)
    if bad:
        raise listed(f"invalid rsl_rl config {source}: {len(bad)} key(s) gmiexp cannot honour", bad,
                     f"invalid rsl_rl config {source}")


def trained_on(recipe: Mapping[str, Any], file: str) -> str:
    """The device the file (else the recipe) says it trained on, or "" (Isaac Lab writes ``device: cuda:0``)."""
    for cfg in ((read_file(file) if file else {}), recipe):
        dev = cfg.get(TRAINED_DEVICE)
        if isinstance(dev, str) and dev:
            return dev
    return ""


def device_note(trained: str, device: str, gmis: int) -> str:
    """The one line that says where a config trained and where the GMIs train instead ("" when it names none)."""
    if not trained:
        return ""
    return (f"the rsl_rl config trained on device {trained!r}; here its {gmis} GMI(s) train on the Plan's devices "
            f"(train.device): GMI 0 on {device!r}")


def runner_config(recipe: Mapping[str, Any], file: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The runner config a GMI trains with, in the current format, checked, rsl_rl's defaults filled in.

    ``recipe`` (mjlab's registered one, or {}), then ``file``, then ``overrides`` (``train.rslrl.*``). The
    device a recipe or file trained on is dropped (:func:`trained_on` reads it): the Plan places the GMIs.
    """
    cfg = upgrade_legacy(recipe)
    if file:
        raw = read_file(file)
        check(raw, f"train.file={file}")
        cfg = merge(cfg, upgrade_legacy(raw))
    if overrides:
        check(overrides, "train.rslrl", trained_device=False)
        cfg = merge(cfg, upgrade_legacy(overrides))
    check(cfg, "(recipe, file and train.rslrl together)")
    cfg.pop(TRAINED_DEVICE, None)
    return merge(DEFAULTS, cfg)


def fit_batch(cfg: dict[str, Any], num_envs: int, gmis: int) -> str:
    """Refuse a partition whose GMIs cannot split rsl_rl's minibatches evenly (exit 2, naming the valid counts).

    ``num_mini_batches`` is one process's on the whole batch: feed-forward GMIs take their rows of one process's
    minibatches (:mod:`gmiexp.rl.rslrl.minibatch`), recurrent ones cut their own ``num_envs`` environments into
    that many blocks, so each GMI's share must divide. When even one process could not cut the whole batch evenly
    (rsl_rl then drops the remainder), the returned warning names the counts that can; else "".
    """
    steps = int(cfg["num_steps_per_env"])
    mini = int(cfg["algorithm"].get("num_mini_batches", 4))
    total = num_envs * gmis
    if (total * steps) % mini:
        valid = [m for m in range(1, min(total * steps, 64) + 1) if (num_envs * steps) % m == 0]
        return (f"rsl_rl's num_mini_batches={mini} does not divide the {total * steps} samples of one update "
                f"({total} environments x {steps} steps): rsl_rl drops the remainder; num_mini_batches that "
                f"divide each GMI's share: {', '.join(map(str, valid))}")
    if (num_envs * steps) % mini:
        valid = [g for g in range(1, total + 1) if total % g == 0 and (total // g * steps) % mini == 0]
        raise ConfigError(f"invalid GMI count: {gmis} GMIs of {num_envs} environments x {steps} steps cannot cut "
                          f"{mini} equal minibatches (algorithm.num_mini_batches); valid GMI counts for "
                          f"{total} environments: {', '.join(map(str, valid))}")
    return ""


def check_config(layout: str, file: str, overrides: Mapping[str, Any]) -> None:
    """``train=rslrl``'s checks that need no node (exit 2): tcg_ex, every key of the file and overrides honoured.

    A launcher that submits jobs elsewhere makes them before it submits (:func:`gmiexp.planner.build.check_config`).
    tcg_ex only: the serving and experience layouts run gmiexp's own learner, not rsl_rl's update. An mjlab task's
    registered recipe is read in the GMIs (mjlab is too heavy for planning), which check it there.
    """
    if layout != "tcg_ex":
        raise ConfigError(f"invalid layout for train=rslrl: {layout!r}; valid: tcg_ex (rsl_rl's update runs in "
                          "holistic GMIs; the serving and experience layouts train with gmiexp's learner)")
    runner_config({}, file, overrides)


def check_partition(file: str, overrides: Mapping[str, Any], num_envs: int, gmis: int, simulator: str) -> None:
    """Plan-time check of ``train=rslrl`` (exit 2 before launch): the partition splits the minibatches evenly."""
    cfg = runner_config({}, file, overrides)
    if simulator != "mjlab" or file or overrides.get("num_steps_per_env"):
        warning = fit_batch(cfg, num_envs, gmis)
        if warning:
            logging.getLogger("gmiexp").warning(warning)
