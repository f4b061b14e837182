"""A checkpoint of another task or network is bad input: exit 2 in one line before anything starts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from gmitest import FAST, compose_config, run_cli

from gmiexp.app import run
from gmiexp.rl.rlgames.fit import checkpoint_sizes, differs, read_model, task_sizes

ONE = ["gmis_per_gpu=1", "launch.inprocess=true"]


@pytest.fixture(scope="module")
def cartpole_checkpoint(tmp_path_factory) -> Path:
    """A real one: one epoch of torch Cartpole (4 observations, 2 actions, mlp [32, 32]), its record beside it."""
    run_dir = tmp_path_factory.mktemp("cartpole")
    r = run_cli(*FAST, *ONE, "max_iterations=1", f"hydra.run.dir={run_dir}")
    assert r.returncode == 0, r.stderr[-2000:]
    return next((run_dir / "rl_games" / "run" / "nn").glob("last_*.pth"))


def test_a_checkpoint_holds_the_sizes_of_the_task_it_was_trained_on(cartpole_checkpoint: Path) -> None:
    have = checkpoint_sizes(read_model(cartpole_checkpoint))
    assert have == task_sizes(compose_config(*FAST).task)
    assert (have.obs, have.actions, have.mlp) == (4, 2, (32, 32))
    assert differs(have, task_sizes(compose_config("task=Ant").task))
    assert differs(have, task_sizes(compose_config(*FAST, "task.mlp_units=[64,64]").task))


def error_lines(r) -> list[str]:
    return [ln for ln in r.stderr.splitlines() if ln.startswith("gmiexp: error:")]


def test_training_from_another_tasks_checkpoint_exits_2_before_launch(cartpole_checkpoint: Path,
                                                                      tmp_path: Path) -> None:
    r = run_cli("task=Ant", "gmis_per_gpu=1", f"checkpoint={cartpole_checkpoint}", f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode == 2, r.stderr[-3000:]
    (line,) = error_lines(r)
    assert ("its policy has task Cartpole, 4 observations, 2 actions, mlp [32, 32]; this run's has task Ant, "
            "27 observations, 8 actions, mlp [256, 128, 64]") in line and "(task=Cartpole)" in line
    assert "Traceback" not in r.stderr and "size mismatch" not in r.stderr and r.stdout == ""
    assert not (tmp_path / "run" / "gmis").exists()  # no GMI started


def test_another_network_is_refused_too(cartpole_checkpoint: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The job in this process (a launch costs 3-4 s of CPU): the CLI's exit 2 on this refusal, one line and no
    traceback, is test_training_from_another_tasks_checkpoint_exits_2_before_launch's."""
    capsys.readouterr()
    code = run(compose_config(*FAST, *ONE, "task.mlp_units=[64,64]", f"checkpoint={cartpole_checkpoint}"),
               tmp_path / "run")
    r = capsys.readouterr()
    assert code == 2, r.err[-3000:]
    (line,) = [ln for ln in r.err.splitlines() if ln.startswith("gmiexp: error:")]
    assert "mlp [32, 32]; this run's has task Cartpole, 4 observations, 2 actions, mlp [64, 64]" in line
    assert "Traceback" not in r.err and r.out == "" and not (tmp_path / "run" / "gmis").exists()


def test_eval_of_another_tasks_checkpoint_exits_2_naming_both_sizes(cartpole_checkpoint: Path,
                                                                    tmp_path: Path) -> None:
    alone = tmp_path / "alone" / "x.pth"  # no record beside it: the sizes alone say it is not Ant's
    alone.parent.mkdir()
    shutil.copy(cartpole_checkpoint, alone)
    r = run_cli("mode=eval", f"checkpoint={alone}", "task=Ant", f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode == 2, r.stderr[-3000:]
    (line,) = error_lines(r)
    assert "its policy has 4 observations, 2 actions, mlp [32, 32]; this run's has task Ant, 27 observations" in line
    assert "Traceback" not in r.stderr and r.stdout == ""
