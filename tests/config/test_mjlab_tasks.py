"""``task=<id>`` for every task mjlab registers, with no file under conf/task: composed, trained, typos refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gmitest import run_cli

from gmiexp.config.compose import compose_config, conf_dir
from gmiexp.config.mjlab_tasks import file_options

pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")


def test_a_registered_id_composes_from_mjlab_s_registry() -> None:
    from mjlab.tasks.registry import load_rl_cfg

    env_id = "Mjlab-Velocity-Flat-Unitree-G1"
    assert env_id not in file_options(conf_dir())
    task = compose_config("train=rslrl", f"task={env_id}").task
    assert (task.name, task.simulator, task.env_id) == (env_id, "mjlab", env_id)
    assert task.mlp_units == list(load_rl_cfg(env_id).actor.hidden_dims) and task.central_value


def test_an_unknown_task_exits_2_naming_the_files_and_mjlab_s_ids(tmp_path: Path) -> None:
    r = run_cli("mode=plan", "train=rslrl", "task=Mjlab-Velocity-Flat-Unitree-G2", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 2, r.stderr[-2000:]
    assert "invalid task: 'Mjlab-Velocity-Flat-Unitree-G2'" in r.stderr
    assert "Mjlab-Velocity-Flat-Unitree-G1" in r.stderr and "CartPoleEnvpool" in r.stderr


@pytest.mark.timeout(600)
def test_an_id_without_a_conf_task_file_trains_two_gmis(tmp_path: Path) -> None:
    env_id = "Mjlab-Cartpole-Swingup"
    assert env_id not in file_options(conf_dir())
    r = run_cli("train=rslrl", f"task={env_id}", "gmis_per_gpu=2", "max_iterations=2", "batch.total_envs=4",
                "train.device=cpu", "launch.progress=false", f"hydra.run.dir={tmp_path}", timeout=560)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["status"] == "ok" and s["config"]["task"]["env_id"] == env_id
    assert (tmp_path / "rsl_rl" / "model_1.pt").is_file()
