"""Compose the typed config outside the CLI (tests, experiments, the baseline), same as ``python -m gmiexp``."""

from __future__ import annotations

from hydra import compose, initialize_config_dir

from gmiexp.config import Config, register_configs


def compose_config(*overrides: str) -> Config:
    """The typed Config that ``python -m gmiexp overrides`` would see; launches nothing.

    Unknown keys and a bad ``train.file`` raise here; value ranges are checked when the config is planned or run.
    """
    from gmiexp.__main__ import conf_dir
    from gmiexp.app import to_config

    register_configs()
    with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return to_config(cfg, check=False)
