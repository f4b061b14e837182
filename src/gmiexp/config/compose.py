"""Hydra config -> the typed :class:`~gmiexp.config.Config`, for the CLI and for code that composes without it.

The CLI (``gmiexp.__main__``) and ``compose_config`` (tests, experiments, the baseline) both find ``conf/`` with
:func:`conf_dir` and type the result with :func:`to_config`; this module imports neither the CLI nor the app.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gmiexp.config import igym
from gmiexp.config.checks import check_keys, validate
from gmiexp.config.mjlab_tasks import check_task_override
from gmiexp.config.registration import register_configs
from gmiexp.config.rlgames_yaml import check_file_used, unwrap
from gmiexp.config.schema import Config


def conf_dir() -> str:
    """``conf/`` packaged in the wheel (gmiexp/conf) or the repository's top-level ``conf/``."""
    package = Path(__file__).resolve().parents[1]
    for cand in (package / "conf", package.parents[1] / "conf"):
        if (cand / "config.yaml").is_file():
            return str(cand)
    raise FileNotFoundError("gmiexp's conf/ directory is missing from the installation")


def to_config(cfg: DictConfig | Config, check: bool = True) -> Config:
    """The typed config: known keys, interpolations resolved (train=rlgames reads its file), values in range.

    Anything else raises ConfigError (exit 2). ``check=False`` skips the ranges (tests and experiments compose
    first; planning checks them).
    """
    if not isinstance(cfg, Config):
        check_keys(cfg, Config)
        try:
            cfg = OmegaConf.to_object(cfg)  # type: ignore[assignment]
        except OmegaConfBaseException as e:
            raise unwrap(e) from None
        check_file_used(cfg)  # type: ignore[arg-type]
        igym.apply(cfg)  # test=True, headless, seed=-1 (IsaacGymEnvs' habits)
    if check:
        validate(cfg)  # type: ignore[arg-type]
    return cfg  # type: ignore[return-value]


def compose_config(*overrides: str) -> Config:
    """The typed Config that ``python -m gmiexp overrides`` would see; launches nothing.

    Unknown keys and a bad ``train.file`` raise here; value ranges are checked when the config is planned or run.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    check_task_override(overrides, conf_dir())
    if GlobalHydra.instance().is_initialized():  # inside ``python -m gmiexp``'s job: its Hydra, our search path
        cfg = compose(config_name="config", overrides=list(overrides))
    else:
        with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
            cfg = compose(config_name="config", overrides=list(overrides))
    return to_config(cfg, check=False)
