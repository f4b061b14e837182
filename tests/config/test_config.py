"""Every config group composes; typos and wrong types are rejected before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import NEEDS, compose_config, run_cli

from gmiexp.config.compose import conf_dir
from gmiexp.config.schema import BACKEND_SCHEMAS, GROUP_SCHEMAS, Config


def group_options() -> list[tuple[str, str]]:
    root = Path(conf_dir())
    return [(g, p.stem) for g in GROUP_SCHEMAS for p in sorted((root / g).glob("*.yaml"))]


@pytest.mark.parametrize(("group", "option"), group_options())
def test_every_group_option_composes(group: str, option: str) -> None:
    cfg = compose_config(f"{group}={option}", *NEEDS.get((group, option), []))
    assert isinstance(cfg, Config)
    node = getattr(cfg, group)
    assert isinstance(node, GROUP_SCHEMAS[group])
    if group == "backend":  # each backend option has its own schema (conf/backend/<option>.yaml extends it)
        assert type(node) is BACKEND_SCHEMAS[option]
    if hasattr(node, "name") and group not in ("task", "search", "train"):
        assert node.name == option


def test_defaults() -> None:
    cfg = compose_config()
    assert (cfg.mode, cfg.backend.name, cfg.layout.name) == ("train", "direct", "tcg_ex")
    assert cfg.task.name == "CartPoleEnvpool"
    assert cfg.num_envs == 256  # the first run learns CartPole in under a minute (tests/test_first_run.py)
    assert cfg.train.mixed_precision is False and cfg.train.torch_compile is False


def test_typo_in_key_is_rejected_with_exit_2() -> None:
    r = run_cli("backend.pinn_cores=true", "mode=plan")
    assert r.returncode == 2
    assert "pinn_cores" in r.stderr


def test_wrong_type_is_rejected_with_exit_2() -> None:
    r = run_cli("num_envs=many", "mode=plan")
    assert r.returncode == 2
    assert "num_envs" in r.stderr


def test_help_and_cfg_job_work() -> None:
    r = run_cli("--help")
    assert r.returncode == 0 and "Usage: python -m gmiexp" in r.stdout
    assert "layout: decoupled_async" in r.stdout and "tcg_ex" in r.stdout
    r = run_cli("--cfg", "job", "task=Humanoid")
    assert r.returncode == 0 and "env_id: Humanoid-v4" in r.stdout
