"""``train=rslrl checkpoint=`` of another task or network, or not rsl_rl's: exit 2 in one line before launch.

Before, the launcher checked rl-games checkpoints only: the GMIs started (simulator built, rsl_rl imported) and
rsl_rl's ``load_state_dict`` failed in each with a page of ``size mismatch`` lines and exit 1.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gmitest import run_here

from gmiexp.config import TaskConfig
from gmiexp.errors import ConfigError
from gmiexp.rl.rslrl.checkpoint import check_checkpoint_fits, check_state_fits

#: the tests' own rsl_rl VecEnv (tests/helpers/rslrl_vecenv.py): its sizes are known once built
POINT = ["train=rslrl", "task=Cartpole", "task.vec_env=rslrl_vecenv:make", "gmis_per_gpu=1"]


def actor(obs: int, hidden: int, actions: int) -> torch.nn.Module:
    """An actor with rsl_rl 5's tensor names: ``mlp.<i>`` layers and a Gaussian's ``distribution.std_param``."""
    net = torch.nn.Module()
    net.mlp = torch.nn.Sequential(torch.nn.Linear(obs, hidden), torch.nn.ELU(), torch.nn.Linear(hidden, actions))
    net.distribution = torch.nn.Module()
    net.distribution.std_param = torch.nn.Parameter(torch.ones(actions))
    return net


def save_checkpoint(path: Path, net: torch.nn.Module) -> Path:
    torch.save({"actor_state_dict": net.state_dict(), "critic_state_dict": {}, "iter": 3, "infos": None}, path)
    return path


def error_line(r) -> str:
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("gmiexp: error:")]
    return line


def test_another_tasks_checkpoint_is_refused_naming_both_sides_sizes(tmp_path: Path) -> None:
    """An mjlab task's sizes are in the task table: known before anything is built or mjlab is imported. The run's
    exit 2 before launch on this check is the next test's (the same call in ``gmiexp.app``)."""
    ckpt = save_checkpoint(tmp_path / "model_3.pt", actor(7, 32, 3))
    task = TaskConfig(name="Mjlab-Cartpole-Balance", simulator="mjlab", env_id="Mjlab-Cartpole-Balance")
    with pytest.raises(ConfigError) as e:
        check_checkpoint_fits(ckpt, task)
    assert str(e.value) == (
        f"invalid checkpoint={ckpt}: its policy has 7 observations, 3 actions, mlp [32]; this run's has task "
        "Mjlab-Cartpole-Balance, 5 observations, 1 actions; valid: a checkpoint of task Mjlab-Cartpole-Balance "
        "with that network, or the checkpoint's own task")
    check_checkpoint_fits(save_checkpoint(tmp_path / "model_4.pt", actor(5, 32, 1)), task)  # its own task's: fits


def test_a_file_that_is_not_rsl_rls_exits_2_before_launch(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = tmp_path / "last_Cartpole_ep_4.pth"
    torch.save({"model": actor(4, 32, 2).state_dict(), "epoch": 4}, ckpt)  # an rl-games checkpoint
    r = run_here(capsys, tmp_path / "run", *POINT, f"checkpoint={ckpt}")
    assert r.returncode == 2, r.stderr[-3000:]
    assert f"invalid checkpoint={ckpt}: not an rsl_rl checkpoint" in error_line(r)
    assert not (tmp_path / "run" / "gmis").exists()


def test_the_gmi_names_hidden_units_that_differ_in_one_line(tmp_path: Path) -> None:
    """What the launcher cannot see (a task.vec_env's sizes, the recipe's hidden units), the GMI says in one line."""
    ckpt = save_checkpoint(tmp_path / "model_3.pt", actor(5, 32, 1))
    check_state_fits(ckpt, actor(5, 32, 1), "Mjlab-Cartpole-Balance")  # the same network: no error
    with pytest.raises(ConfigError) as e:
        check_state_fits(ckpt, actor(5, 64, 1), "Mjlab-Cartpole-Balance")
    msg = str(e.value)
    assert "its policy has 5 observations, 1 actions, mlp [32]; this run's has task Mjlab-Cartpole-Balance, " \
           "5 observations, 1 actions, mlp [64]" in msg
    assert "mlp.0.weight: checkpoint (32, 5), policy (64, 5)" in msg and "\n" not in msg
