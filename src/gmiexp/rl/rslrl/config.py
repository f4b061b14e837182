"""rsl_rl runner configs as users keep them: read, upgraded from the pre-4.0 format, checked, fitted to a GMI.

Light on purpose (YAML, no rsl_rl): the planner checks ``train.file`` with it before anything launches, and the
GMIs build the runner config with it. Keys gmiexp cannot honour are refused together, each with its reason.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gmiexp.config.rslrl_keys import RUNNER_KEYS as RSLRL_RUNNER_KEYS
from gmiexp.errors import ConfigError

#: where group rank 0 keeps rsl_rl's checkpoints (``model_<it>.pt``) and TensorBoard log, under the run dir
CHECKPOINT_DIR = "rsl_rl"
#: the role ``train=rslrl`` selects (conf/train/rslrl.yaml)
ROLE = "rslrl"

#: runner keys gmiexp passes to rsl_rl (or reads itself)
RUNNER_KEYS = frozenset(RSLRL_RUNNER_KEYS)
#: keys refused whatever their value, with the reason
REFUSED = {
    "multi_gpu": "gmiexp owns the process group: its GMIs reduce through the Plan's reduction",
    "device": "the GMI's device comes from train.device (and the Plan)",
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
#: the pre-4.0 ``policy`` block's keys, mapped onto the current ``actor``/``critic`` models
LEGACY_POLICY_KEYS = frozenset({
    "class_name", "init_noise_std", "noise_std_type", "actor_hidden_dims", "critic_hidden_dims", "activation",
    "actor_obs_normalization", "critic_obs_normalization",
})
LEGACY_POLICIES = ("ActorCritic",)
#: the current format's defaults where a file leaves them out (rsl_rl's own: MLP actor with a scalar Gaussian)
DEFAULTS: dict[str, Any] = {"num_steps_per_env": 24, "save_interval": 50, "obs_groups": {},
                            "actor": {"class_name": "MLPModel",
                                      "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0,
                                                           "std_type": "scalar"}},
                            "critic": {"class_name": "MLPModel"}, "algorithm": {"class_name": "PPO"}}


def read_file(path: str | Path) -> dict[str, Any]:
    """An rsl_rl runner config from YAML: a plain runner dict or Isaac Lab's / mjlab's ``params/agent.yaml``."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"invalid train.file: {str(path)!r}; valid: an rsl_rl runner config YAML that exists")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid train.file: {str(path)!r}; not YAML ({e})") from e
    if not isinstance(data, dict):
        raise ConfigError(f"invalid train.file: {str(path)!r}; valid: a mapping of rsl_rl runner keys")
    return data


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, nested mappings merged key by key (neither is modified)."""
    out = copy.deepcopy(dict(base))
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else copy.deepcopy(v)
    return out


def upgrade_legacy(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The pre-4.0 ``policy: {class_name: ActorCritic, ...}`` block as current ``actor``/``critic`` models.

    What Isaac Lab's ``handle_deprecated_rsl_rl_cfg`` does: hidden sizes, activation and the noise go to the
    actor's MLP and Gaussian; ``empirical_normalization`` turns on both models' observation normalisers.
    """
    out = copy.deepcopy(dict(cfg))
    policy = out.pop("policy", None)
    norm = out.pop("empirical_normalization", None)
    if policy is None:
        if norm is not None:
            for m in ("actor", "critic"):
                out.setdefault(m, {}).setdefault("obs_normalization", bool(norm))
        return out
    act = policy.get("activation", "elu")
    actor = {"class_name": "MLPModel", "hidden_dims": list(policy.get("actor_hidden_dims", [256, 256, 256])),
             "activation": act,
             "obs_normalization": bool(policy.get("actor_obs_normalization", bool(norm))),
             "distribution_cfg": {"class_name": "GaussianDistribution",
                                  "init_std": float(policy.get("init_noise_std", 1.0)),
                                  "std_type": policy.get("noise_std_type", "scalar")}}
    critic = {"class_name": "MLPModel", "hidden_dims": list(policy.get("critic_hidden_dims", [256, 256, 256])),
              "activation": act,
              "obs_normalization": bool(policy.get("critic_obs_normalization", bool(norm)))}
    out["actor"] = merge(actor, out.get("actor", {}))
    out["critic"] = merge(critic, out.get("critic", {}))
    return out


def problems(cfg: Mapping[str, Any]) -> list[str]:
    """Every key of ``cfg`` gmiexp cannot honour, each with its reason (empty: all honoured)."""
    out = [f"{k}: {why}" for k, why in REFUSED.items() if cfg.get(k) is not None]
    out += [f"{k}: not an rsl_rl OnPolicyRunner key (known: {', '.join(sorted(RUNNER_KEYS))})"
            for k in cfg if k not in RUNNER_KEYS and k not in REFUSED]
    runner = cfg.get("class_name")
    if runner is not None and str(runner).rsplit(":", 1)[-1].rsplit(".", 1)[-1] not in (*RUNNERS, "OnPolicyRunner"):
        out.append(f"class_name: {runner!r}; gmiexp runs rsl_rl's OnPolicyRunner (valid: {', '.join(RUNNERS)})")
    policy = cfg.get("policy")
    if isinstance(policy, Mapping):
        name = policy.get("class_name", "ActorCritic")
        if name not in LEGACY_POLICIES:
            out.append(f"policy.class_name: {name!r}; the pre-4.0 format is imported for "
                       f"{', '.join(LEGACY_POLICIES)} only (a recurrent or student-teacher policy: write the "
                       "current actor/critic models)")
        out += [f"policy.{k}: not a pre-4.0 ActorCritic key" for k in policy if k not in LEGACY_POLICY_KEYS]
    algo = cfg.get("algorithm", {}) or {}
    name = algo.get("class_name", "PPO")
    if name not in ALGORITHMS:
        out.append(f"algorithm.class_name: {name!r}; valid: {', '.join(ALGORITHMS)} (gmiexp reduces PPO's "
                   "gradients; Distillation is not supported)")
    out += [f"algorithm.{k}: not an rsl_rl PPO key (known: {', '.join(sorted(ALGORITHM_KEYS))})"
            for k in algo if k not in ALGORITHM_KEYS]
    if algo.get("schedule", "adaptive") not in ("adaptive", "fixed"):
        out.append(f"algorithm.schedule: {algo['schedule']!r}; valid: adaptive, fixed")
    return out


def check(cfg: Mapping[str, Any], source: str) -> None:
    """Refuse ``cfg`` (exit 2) naming every key gmiexp cannot honour, all at once."""
    bad = problems(cfg)
    if bad:
        raise ConfigError(f"invalid rsl_rl config {source}: {len(bad)} key(s) gmiexp cannot honour:\n  "
                          + "\n  ".join(bad))


def runner_config(recipe: Mapping[str, Any], file: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The runner config a GMI trains with, in the current format, checked, rsl_rl's defaults filled in.

    ``recipe`` (mjlab's registered one, or {}), then ``file``, then ``overrides`` (``train.rslrl.*``).
    """
    cfg = upgrade_legacy(recipe)
    if file:
        raw = read_file(file)
        check(raw, f"train.file={file}")
        cfg = merge(cfg, upgrade_legacy(raw))
    if overrides:
        check(overrides, "train.rslrl")
        cfg = merge(cfg, upgrade_legacy(overrides))
    check(cfg, "(recipe, file and train.rslrl together)")
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


def check_plan(layout: str, file: str, overrides: Mapping[str, Any], num_envs: int, gmis: int,
               simulator: str) -> None:
    """Plan-time checks of ``train=rslrl`` (exit 2 before anything launches).

    tcg_ex only (the serving and experience layouts run gmiexp's own learner, not rsl_rl's update); every key
    of ``train.file`` and ``train.rslrl`` honoured; the partition splits the minibatches evenly. An mjlab task's
    registered recipe is read in the GMIs (mjlab is too heavy for planning), which check it there.
    """
    if layout != "tcg_ex":
        raise ConfigError(f"invalid layout for train=rslrl: {layout!r}; valid: tcg_ex (rsl_rl's update runs in "
                          "holistic GMIs; the serving and experience layouts train with gmiexp's learner)")
    cfg = runner_config({}, file, overrides)
    if simulator != "mjlab" or file or overrides.get("num_steps_per_env"):
        warning = fit_batch(cfg, num_envs, gmis)
        if warning:
            logging.getLogger("gmiexp").warning(warning)
