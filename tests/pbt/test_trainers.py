"""What the controller does otherwise per trainer: an epoch's frames (rl-games' horizon, rsl_rl's num_steps_per_env),
the values a mutation of an rsl_rl key starts from (the config's, else rsl_rl's PPO default), and a restart's copy
keeping the source's learning only, with a mutated rate where the trainer's load reads it."""

from __future__ import annotations

from pathlib import Path

import torch
from gmitest import compose_config

from gmiexp.config.compose import to_config
from gmiexp.pbt.trainers import copy_for_another_run, member_training, rslrl_checkpoint
from gmiexp.planner.build import build_plan

RSLRL = ["train=rslrl", "task=Cartpole", "task.vec_env=rslrl_vecenv:make", "batch.total_envs=8",
         "+train.rslrl.num_steps_per_env=16", "+train.rslrl.algorithm.gamma=0.97", "train.device=cpu", "num_gpus=1",
         "gmis_per_gpu=1", "train.horizon_length=32"]
LR, GAMMA, LAM = (f"train.rslrl.algorithm.{k}" for k in ("learning_rate", "gamma", "lam"))


def test_an_rsl_rl_epoch_is_its_num_steps_per_env_and_unset_values_come_from_its_config_or_ppos_defaults(
        tmp_path: Path) -> None:
    cfg = to_config(compose_config(*RSLRL))
    plan, _ = build_plan(cfg, tmp_path)
    frames, values = member_training(cfg, plan, [{LR: 3e-4, GAMMA: None, LAM: None}, {LR: None, GAMMA: 0.9, LAM: None}])
    assert frames == 8 * 16  # not train.horizon_length (32): rsl_rl steps num_steps_per_env
    assert values == [{LR: 3e-4, GAMMA: 0.97, LAM: 0.95}, {LR: 1e-3, GAMMA: 0.9, LAM: 0.95}]  # the config's; PPO's


def test_an_rl_games_epoch_is_its_horizon(tmp_path: Path) -> None:
    cfg = to_config(compose_config("task=Cartpole", "num_envs=32", "train.horizon_length=16", "num_gpus=1",
                                   "gmis_per_gpu=1"))
    plan, _ = build_plan(cfg, tmp_path)
    assert member_training(cfg, plan, [{"train.learning_rate": 1e-3}]) == (32 * 16, [{"train.learning_rate": 1e-3}])


def test_a_restart_copy_of_an_rsl_rl_checkpoint_keeps_its_learning_and_takes_the_mutated_rate(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    state = {"actor_state_dict": model.state_dict(), "critic_state_dict": model.state_dict(),
             "optimizer_state_dict": opt.state_dict(), "iter": 4,
             "infos": {"gmiexp_run": {"segment": 1, "gmis": [{"generators": {}}]}}}
    (tmp_path / "rsl_rl").mkdir()
    torch.save(state, tmp_path / "rsl_rl" / "model_4.pt")
    source = rslrl_checkpoint(tmp_path, 5)  # epoch 5 (1-based) is rsl_rl's iteration 4
    assert source == tmp_path / "rsl_rl" / "model_4.pt" and rslrl_checkpoint(tmp_path, 4) is None
    copy_for_another_run(source, tmp_path / "start.pth", {LR: 5e-4, GAMMA: 0.9}, {LR: 1e-3, GAMMA: 0.99})
    out = torch.load(tmp_path / "start.pth", weights_only=False)
    assert out["infos"]["gmiexp_run"] == {"segment": 1} and out["iter"] == 4
    assert [g["lr"] for g in out["optimizer_state_dict"]["param_groups"]] == [5e-4]
    assert all(torch.equal(out["actor_state_dict"][k], v) for k, v in state["actor_state_dict"].items())
