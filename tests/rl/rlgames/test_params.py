"""The policy size mode=plan reports is what rl-games really builds, counted without importing rl-games."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from types import SimpleNamespace

import pytest
from gmitest import compose_config

from gmiexp.config.compose import conf_dir
from gmiexp.envs import task_dims, task_state_dim
from gmiexp.rl.rlgames.params import build_params, central_value_param_count, policy_param_count

TASKS = sorted(p.stem for p in (Path(conf_dir()) / "task").glob("*.yaml"))


def rl_games_count(plan: SimpleNamespace) -> int:
    """Parameters of the models rl-games builds from gmiexp's params: the policy, and the central value net."""
    from rl_games.algos_torch.model_builder import ModelBuilder

    obs, act = task_dims(plan.task)
    params = build_params(plan, plan.gmis[0])
    with contextlib.redirect_stdout(io.StringIO()):
        model = ModelBuilder().load(params)
        net = model.build({"actions_num": act, "input_shape": (obs,), "num_seqs": 1, "value_size": 1,
                           "normalize_value": False, "normalize_input": False})
        count = sum(p.numel() for p in net.parameters())
        cv = params["config"].get("central_value_config")
        if cv is not None:  # as rl-games' A2CBase.load_networks and CentralValueTrain build it
            cv_net = ModelBuilder().load({**cv, "model": {"name": "central_value"}}).build({
                "value_size": 1, "input_shape": (task_state_dim(plan.task),), "actions_num": act, "num_agents": 1,
                "num_seqs": 1, "normalize_input": False, "normalize_value": False})
            count += sum(p.numel() for p in cv_net.parameters())
    return count


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("units", [None, [32], [64, 64, 64, 32]])
def test_param_count_equals_rl_games_model(task: str, units: list[int] | None, tmp_path: Path) -> None:
    cfg = compose_config(f"task={task}", *([f"task.mlp_units={units}"] if units else []))
    plan = SimpleNamespace(task=cfg.task, train=cfg.train, seed=1,
                           max_iterations=1, run_dir=str(tmp_path),
                           gmis=[SimpleNamespace(id=0, num_envs=16, torch_threads=1)])
    assert policy_param_count(plan) == rl_games_count(plan)


@pytest.mark.parametrize("task", TASKS)
def test_param_count_holds_a_separate_critic_and_the_central_value_net(task: str, tmp_path: Path) -> None:
    """Table 2's gradient size is everything the reduction moves: a separate critic's tower, the central value net."""
    cfg = compose_config(f"task={task}", "task.separate=true")
    plan = SimpleNamespace(task=cfg.task, train=cfg.train, seed=1, max_iterations=1, run_dir=str(tmp_path),
                           gmis=[SimpleNamespace(id=0, num_envs=16, torch_threads=1)])
    assert policy_param_count(plan) == rl_games_count(plan)
    assert (central_value_param_count(plan) > 0) == bool(cfg.task.central_value and task_state_dim(cfg.task))
