"""Every config group composes; typos and wrong types are rejected before anything starts."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from gmitest import NEEDS, compose_config

from gmiexp import multirun
from gmiexp.__main__ import main
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


MainHere = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def main_here(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
              hydra_restore_singletons: None) -> MainHere:
    """``python -m gmiexp argv`` as its ``main()`` in this process (a launch costs 3-4 s of CPU): the exit code, stdout
    and stderr. None of these cases runs a job. Hydra's own fixture puts its singletons back afterwards: the runtime
    config ``main()`` leaves set would be read by a later test in this worker as its command line. The interpreter's
    own paths stay real launches elsewhere: a misspelt key's exit 2 (tests/config/test_igym.py), Hydra's refusal
    while composing and --help (tests/test_cli_errors.py), --cfg job (tests/config/test_rlgames_yaml.py)."""

    def call(*argv: str) -> subprocess.CompletedProcess:
        monkeypatch.setattr(sys, "argv", ["gmiexp", *argv])
        monkeypatch.setitem(multirun.state, "ran", False)  # as in a fresh process: no job ran
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        out = capsys.readouterr()
        return subprocess.CompletedProcess(list(argv), code, out.out, out.err)

    return call


def test_typo_in_key_is_rejected_with_exit_2(main_here: MainHere) -> None:
    r = main_here("backend.pinn_cores=true", "mode=plan")
    assert r.returncode == 2
    assert "pinn_cores" in r.stderr


def test_wrong_type_is_rejected_with_exit_2(main_here: MainHere) -> None:
    r = main_here("num_envs=many", "mode=plan")
    assert r.returncode == 2
    assert "num_envs" in r.stderr


def test_help_and_cfg_job_work(main_here: MainHere) -> None:
    r = main_here("--help")
    assert r.returncode == 0 and "Usage: python -m gmiexp" in r.stdout
    assert "layout: decoupled_async" in r.stdout and "tcg_ex" in r.stdout
    r = main_here("--cfg", "job", "task=Humanoid")
    assert r.returncode == 0 and "env_id: Humanoid-v4" in r.stdout
