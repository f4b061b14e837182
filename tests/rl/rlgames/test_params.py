"""The policy size mode=plan reports is what rl-games really builds, counted without importing rl-games."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from gmitest import compose_config

from gmiexp.config.compose import conf_dir
from gmiexp.envs import task_spaces, task_state_dim
from gmiexp.envs.spaces import TaskSpaces
from gmiexp.rl.rlgames.params import build_params, central_value_param_count, network_param_count, policy_param_count

TASKS = sorted(p.stem for p in (Path(conf_dir()) / "task").glob("*.yaml"))


def built_count(net: dict[str, Any], sp: TaskSpaces) -> int:
    """Parameters of the network rl-games' own ModelBuilder builds."""
    from rl_games.algos_torch.model_builder import ModelBuilder

    model = {"continuous": "continuous_a2c_logstd", "discrete": "discrete_a2c",
             "multi_discrete": "multi_discrete_a2c"}[sp.action]
    with contextlib.redirect_stdout(io.StringIO()):
        built = ModelBuilder().load({"model": {"name": model}, "network": net})
        m = built.build({"actions_num": list(sp.action_dims) if sp.action == "multi_discrete" else sp.actions_num,
                         "input_shape": sp.obs_shape, "num_seqs": 1, "value_size": 1,
                         "normalize_value": False, "normalize_input": False})
    return sum(p.numel() for p in m.parameters())


def plan_of(tmp_path: Path, *overrides: str) -> SimpleNamespace:
    cfg = compose_config(*overrides)
    return SimpleNamespace(task=cfg.task, train=cfg.train, seed=1, max_iterations=1, run_dir=str(tmp_path),
                           gmis=[SimpleNamespace(id=0, num_envs=16, torch_threads=1, seed=1, env_seed=1)])


def rl_games_count(plan: SimpleNamespace) -> int:
    """Parameters of the models rl-games builds from gmiexp's params: the policy, and the central value net."""
    from rl_games.algos_torch.model_builder import ModelBuilder

    sp = task_spaces(plan.task)
    params = build_params(plan, plan.gmis[0])
    count = built_count(params["network"], sp)
    cv = params["config"].get("central_value_config")
    if cv is not None:  # as rl-games' A2CBase.load_networks and CentralValueTrain build it
        with contextlib.redirect_stdout(io.StringIO()):
            cv_net = ModelBuilder().load({**cv, "model": {"name": "central_value"}}).build({
                "value_size": 1, "input_shape": (task_state_dim(plan.task),), "actions_num": sp.actions_num,
                "num_agents": 1, "num_seqs": 1, "normalize_input": False, "normalize_value": False})
        count += sum(p.numel() for p in cv_net.parameters())
    return count


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("units", [None, [32], [64, 64, 64, 32]])
def test_param_count_equals_rl_games_model(task: str, units: list[int] | None, tmp_path: Path) -> None:
    plan = plan_of(tmp_path, f"task={task}", *([f"task.mlp_units={units}"] if units else []))
    assert policy_param_count(plan) == rl_games_count(plan)


@pytest.mark.parametrize("task", TASKS)
def test_param_count_holds_a_separate_critic_and_the_central_value_net(task: str, tmp_path: Path) -> None:
    """Table 2's gradient size is everything the reduction moves: a separate critic's tower, the central value net."""
    plan = plan_of(tmp_path, f"task={task}", "task.separate=true")
    assert policy_param_count(plan) == rl_games_count(plan)
    assert (central_value_param_count(plan) > 0) == bool(plan.task.central_value and task_state_dim(plan.task))


CONV = {"type": "conv2d", "activation": "elu", "initializer": {"name": "default"}, "regularizer": {"name": "None"},
        "convs": [{"filters": 4, "kernel_size": 8, "strides": 4, "padding": 0},
                  {"filters": 6, "kernel_size": 3, "strides": 1, "padding": 1}]}
NETWORKS = {  # name -> (task, network overrides)
    "cnn-channels-first": ("Pong", {"cnn": {**CONV, "permute_input": False}}),
    "cnn-permuted": ("Pong", {"cnn": {**CONV, "permute_input": True}}),  # on channels-last frames (below)
    "cnn-separate": ("Pong", {"cnn": {**CONV, "permute_input": False}, "separate": True}),
    "cnn-lstm": ("Pong", {"cnn": {**CONV, "permute_input": False},
                          "rnn": {"name": "lstm", "units": 16, "layers": 1}}),
    "lstm-after-mlp": ("Pendulum", {"rnn": {"name": "lstm", "units": 16, "layers": 2}}),
    "gru-before-mlp": ("CartPoleEnvpool", {"rnn": {"name": "gru", "units": 8, "layers": 1, "before_mlp": True,
                                                   "concat_output": True}}),
    "lstm-concat-input-norm": ("CartPoleEnvpool", {"rnn": {"name": "lstm", "units": 8, "layers": 1,
                                                           "concat_input": True, "layer_norm": True}}),
    "lstm-separate": ("PendulumGym", {"rnn": {"name": "lstm", "units": 8, "layers": 1}, "separate": True}),
    "learnt-sigma": ("WalkerWalk", {"space": {"continuous": {"mu_activation": "None", "sigma_activation": "None",
                                                             "mu_init": {"name": "default"},
                                                             "sigma_init": {"name": "default"},
                                                             "fixed_sigma": False}}}),
}


@pytest.mark.parametrize("name", list(NETWORKS))
def test_cnn_rnn_and_separate_counts_equal_rl_games_model(name: str, tmp_path: Path) -> None:
    task, extra = NETWORKS[name]
    plan = plan_of(tmp_path, f"task={task}")
    net = {**build_params(plan, plan.gmis[0])["network"], **extra}
    sp = task_spaces(plan.task)
    if name == "cnn-permuted":
        sp = TaskSpaces((84, 80, 4), "uint8", "discrete", (6,))
    assert network_param_count(net, sp) == built_count(net, sp)


def test_multi_discrete_head_count_equals_rl_games_model(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "task=CartPoleEnvpool")
    net = {**build_params(plan, plan.gmis[0])["network"], "space": {"multi_discrete": {}}}
    sp = TaskSpaces((4,), "float32", "multi_discrete", (3, 5, 2))
    assert network_param_count(net, sp) == built_count(net, sp)


def test_seq_length_and_reward_shaper_reach_rl_games(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "task=Pong", "train.seq_length=8")
    cfg = build_params(plan, plan.gmis[0])
    assert cfg["config"]["seq_length"] == 8
    assert cfg["config"]["reward_shaper"] == {"min_val": -1, "max_val": 1, "scale_value": 1.0}
    assert (cfg["algo"]["name"], cfg["model"]["name"]) == ("a2c_discrete", "discrete_a2c")
    assert cfg["network"]["cnn"]["permute_input"] is False and "discrete" in cfg["network"]["space"]
