"""IsaacGymEnvs' and Isaac Lab's rl-games agent files import: interpolations resolved, tasks mapped or refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from gmitest import compose_config, run_cli

from gmiexp.config.rlgames_hydra import Follows, resolve
from gmiexp.config.rlgames_yaml import SIMULATOR, inspect_file
from gmiexp.errors import ConfigError

FIXTURES = Path(__file__).parent / "fixtures"
IGE = FIXTURES / "isaacgymenvs" / "AntPPO.yaml"  # copied from isaac-sim/IsaacGymEnvs (header says which commit)
LAB = FIXTURES / "isaaclab" / "rl_games_ppo_cfg.yaml"  # copied from isaac-sim/IsaacLab


def test_isaacgymenvs_interpolations_resolve_to_the_file_or_to_gmiexps_own_keys():
    params = resolve(yaml.safe_load(IGE.read_text()), str(IGE))["params"]
    assert params["seed"] == Follows("seed") and params["config"]["num_actors"] == Follows("num_envs")
    assert params["load_checkpoint"] == params["load_path"] == Follows("checkpoint")
    assert params["config"]["name"] == params["config"]["full_experiment_name"] == "Ant"  # ${.name}: a sibling
    assert params["config"]["max_epochs"] == 500  # resolve_default: IsaacGymEnvs' unset max_iterations


def test_isaacgymenvs_file_maps_onto_the_isaacgym_simulator_keeping_gmiexps_launch_values():
    cfg = compose_config("train=rlgames", f"train.file={IGE}", "num_envs=32", "seed=3")
    assert (cfg.task.simulator, cfg.task.env_id, cfg.task.name) == ("isaacgym", "Ant", "Ant")
    assert (cfg.num_envs, cfg.seed, cfg.max_iterations, cfg.checkpoint) == (32, 3, 500, "")
    assert cfg.train.rlgames_config == {"schedule_type": "legacy", "save_best_after": 200}
    assert (cfg.train.minibatch_size, cfg.task.reward_scale, cfg.train.mixed_precision) == (32768, 0.01, True)


def test_an_interpolation_gmiexp_cannot_resolve_is_refused_by_name(tmp_path):
    doc = yaml.safe_load(IGE.read_text())
    doc["params"]["config"]["num_actors"] = "${....task.env.numAgents}"
    with pytest.raises(ConfigError, match=re.escape("invalid interpolation ${....task.env.numAgents}")):
        resolve(doc, "x.yaml")
    doc["params"]["config"]["num_actors"] = "${oc.env:NUM_ENVS}"
    with pytest.raises(ConfigError, match=re.escape("invalid resolver ${oc.env:...}")):
        resolve(doc, "x.yaml")


def test_isaacgymenvs_task_without_a_gmiexp_simulator_names_what_runs_it(tmp_path):
    path = tmp_path / "FrankaCubeStackPPO.yaml"
    path.write_text(IGE.read_text().replace("resolve_default:Ant,", "resolve_default:FrankaCubeStack,"))
    first = sorted(inspect_file(path).refusals, key=lambda r: r.rank)[0]
    assert first.rank == SIMULATOR and "run it with IsaacGymEnvs' train.py task=FrankaCubeStack" in first.reason


def test_isaac_lab_file_exits_2_naming_isaac_lab_and_every_key_it_cannot_honour(tmp_path):
    r = run_cli("mode=plan", "train=rlgames", f"train.file={LAB}", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 2 and r.stdout == ""
    lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip().startswith("params.")]
    assert lines[0].startswith("params.config.env_name='rlgpu': Isaac Lab agent file")
    assert any(ln.startswith("params.env={'clip_observations': 5.0") for ln in lines)
