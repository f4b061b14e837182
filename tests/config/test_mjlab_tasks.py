"""``task=<id>`` for every task mjlab registers, with no file under conf/task: composed, trained, typos refused."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from gmitest import run_cli

from gmiexp.app import run
from gmiexp.config.cli_keys import check_overrides
from gmiexp.config.compose import compose_config, conf_dir
from gmiexp.config.mjlab_tasks import (
    check_host,
    check_task_override,
    file_options,
    host_problems,
    missing_files,
    registered,
)
from gmiexp.envs import MJLAB_DIMS
from gmiexp.envs.mjlab_env import observation_dims
from gmiexp.errors import ConfigError

pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")
from mjlab.tasks.tracking.mdp import MotionCommandCfg  # noqa: E402


def test_a_registered_id_composes_from_mjlab_s_registry() -> None:
    from mjlab.tasks.registry import load_rl_cfg

    env_id = "Mjlab-Velocity-Flat-Unitree-G1"
    assert env_id not in file_options(conf_dir())
    task = compose_config("train=rslrl", f"task={env_id}").task
    assert (task.name, task.simulator, task.env_id) == (env_id, "mjlab", env_id)
    assert task.mlp_units == list(load_rl_cfg(env_id).actor.hidden_dims) and task.central_value


def test_an_unknown_task_exits_2_naming_the_files_and_mjlab_s_ids() -> None:
    """The CLI's check before Hydra runs, in this process (mjlab's import is this file's already); its ConfigError is
    the CLI's exit 2 as for any key it refuses (tests/test_cli_errors.py)."""
    with pytest.raises(ConfigError) as e:
        check_overrides(["mode=plan", "train=rslrl", "task=Mjlab-Velocity-Flat-Unitree-G2"])
    assert "invalid task: 'Mjlab-Velocity-Flat-Unitree-G2'" in str(e.value)
    assert "Mjlab-Velocity-Flat-Unitree-G1" in str(e.value) and "CartPoleEnvpool" in str(e.value)
    assert str(e.value).endswith("did you mean Mjlab-Velocity-Flat-Unitree-G1?")


def test_a_users_task_file_on_hydra_searchpath_is_no_unknown_task(tmp_path: Path) -> None:
    """A task of the user's own (a ``task/`` directory on ``hydra.searchpath``, tests/test_extension_points.py)."""
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "Drift.yaml").write_text("name: Drift\n")
    check_task_override(["task=Drift", f"hydra.searchpath=[file://{tmp_path}]"], conf_dir())
    check_task_override(["task=Drift", "hydra.searchpath=[pkg://somewhere.conf]"], conf_dir())  # Hydra decides
    with pytest.raises(ConfigError, match="invalid task: 'Drift'"):
        check_task_override(["task=Drift"], conf_dir())


def test_a_task_in_hydra_s_config_store_is_no_unknown_task() -> None:
    """A task a user registers in Python (``ConfigStore.store(group="task", ...)``, as tests/helpers/pixel_sim.py)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(group="task", name="stored_drift", node={"name": "StoredDrift"})
    check_task_override(["task=stored_drift"], conf_dir())
    with pytest.raises(ConfigError, match="invalid task: 'stored_drft'"):
        check_task_override(["task=stored_drft"], conf_dir())


# slow: tests/rl/rslrl/test_training.py trains 2 GMIs of two ids that no longer have a conf/task file either
# (Mjlab-Cartpole-Balance, Mjlab-Velocity-Flat-Unitree-Go1) in the default suite; this one adds a third id
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_id_without_a_conf_task_file_trains_two_gmis(tmp_path: Path) -> None:
    env_id = "Mjlab-Cartpole-Swingup"
    assert env_id not in file_options(conf_dir())
    r = run_cli("train=rslrl", f"task={env_id}", "gmis_per_gpu=2", "max_iterations=2", "batch.total_envs=4",
                "train.device=cpu", "launch.progress=false", f"hydra.run.dir={tmp_path}", timeout=560)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["status"] == "ok" and s["config"]["task"] == env_id
    assert yaml.safe_load((tmp_path / "plan.yaml").read_text())["task"]["env_id"] == env_id
    assert (tmp_path / "rsl_rl" / "model_1.pt").is_file()


def test_a_task_missing_its_data_file_is_refused_naming_it_and_one_that_has_it_is_not(tmp_path: Path) -> None:
    """mjlab's tracking tasks replay a motion file the registered config leaves empty (every GMI would fail)."""
    for env_id in [i for i in registered() if "Tracking" in i]:
        (why,) = host_problems(env_id)
        assert why.startswith("commands.motion.motion_file=''") and "W&B registry" in why
    motion = tmp_path / "motion.npz"
    motion.write_bytes(b"")
    command = MotionCommandCfg(motion_file=str(motion), anchor_body_name="torso", body_names=("torso",),
                               entity_name="robot", resampling_time_range=(1.0, 1.0))
    assert missing_files(SimpleNamespace(commands={"motion": command})) == []
    command.motion_file = str(tmp_path / "absent.npz")
    assert missing_files(SimpleNamespace(commands={"motion": command})) == [
        f"commands.motion.motion_file={command.motion_file!r}: the task reads this file in every environment and "
        "mjlab's registered config has none (mjlab's train downloads a motion from a W&B registry, --registry-name); "
        "gmiexp has no motion to give it"]


def test_every_other_registered_id_has_sizes_without_building_it() -> None:
    """mode=plan sizes a task from MJLAB_DIMS; a registered id the table lacks would be built on the CPU to plan."""
    sizable = [i for i in registered() if not host_problems(i)]
    assert set(sizable) == set(MJLAB_DIMS)  # the table holds no task that is refused here (it skips the check)


@pytest.mark.parametrize("env_id", ["Mjlab-Cartpole-Balance", pytest.param("Mjlab-Lift-Cube-Yam-Rgb",
                                                                          marks=pytest.mark.slow)])
def test_size_table_is_mjlab_s_own(env_id: str) -> None:
    assert observation_dims(env_id) == MJLAB_DIMS[env_id]


def test_an_id_beyond_the_size_table_and_a_task_that_cannot_run_here_plan_or_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: every registered id outside MJLAB_DIMS exited 2 as 'invalid mjlab env_id', tracking too.

    Both jobs in this process (two launches cost ~30 s of CPU, each importing mjlab's tasks, which this module has
    imported already); the CLI's exit 2 on a task is test_an_unknown_task_exits_2_naming_the_files_and_mjlab_s_ids's.
    """
    capsys.readouterr()
    ok = run(compose_config("mode=plan", "train=rslrl", "task=Mjlab-Lift-Cube-Yam-Depth", "gmis_per_gpu=2"),
             tmp_path / "a")
    out = capsys.readouterr()
    assert ok == 0 and out.out.startswith("gmis:"), out.err[-2000:]
    code = run(compose_config("mode=plan", "train=rslrl", "task=Mjlab-Tracking-Flat-Unitree-G1"), tmp_path / "b")
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert ("invalid task: 'Mjlab-Tracking-Flat-Unitree-G1'; mjlab's task cannot run here (1 reason(s)):\n"
            "  commands.motion.motion_file=''") in err
    with pytest.raises(ConfigError) as e:  # each reason its own (ConfigError.reasons), naming the task
        check_host("Mjlab-Tracking-Flat-Unitree-G1")
    assert [r.split(": ")[:3] for r in e.value.reasons] == [
        ["invalid task", "'Mjlab-Tracking-Flat-Unitree-G1'; mjlab's task cannot run here",
         "commands.motion.motion_file=''"]], e.value.reasons
