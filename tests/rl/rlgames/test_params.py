"""The policy size mode=plan reports is what rl-games really builds, counted without importing rl-games."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from types import SimpleNamespace

import pytest
from gmitest import compose_config

from gmiexp.config.compose import conf_dir
from gmiexp.envs import task_dims
from gmiexp.rl.rlgames.params import build_params, policy_param_count

TASKS = sorted(p.stem for p in (Path(conf_dir()) / "task").glob("*.yaml"))


def rl_games_count(plan: SimpleNamespace) -> int:
    from rl_games.algos_torch.model_builder import ModelBuilder

    obs, act = task_dims(plan.task)
    with contextlib.redirect_stdout(io.StringIO()):
        model = ModelBuilder().load(build_params(plan, plan.gmis[0]))
        net = model.build({"actions_num": act, "input_shape": (obs,), "num_seqs": 1, "value_size": 1,
                           "normalize_value": False, "normalize_input": False})
    return sum(p.numel() for p in net.parameters())


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("units", [None, [32], [64, 64, 64, 32]])
def test_param_count_equals_rl_games_model(task: str, units: list[int] | None, tmp_path: Path) -> None:
    cfg = compose_config(f"task={task}", *([f"task.mlp_units={units}"] if units else []))
    plan = SimpleNamespace(task=cfg.task, train=cfg.train, seed=1,
                           max_iterations=1, run_dir=str(tmp_path),
                           gmis=[SimpleNamespace(id=0, num_envs=16, torch_threads=1)])
    assert policy_param_count(plan) == rl_games_count(plan)
