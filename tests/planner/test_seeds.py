"""Every GMI draws its own random streams, from the run's seed, in every layout and across nodes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gmitest import compose_config
from rl_games.torch_runner import Runner

from gmiexp.planner.build import build_plan
from gmiexp.rl.rlgames.params import build_params


@pytest.mark.parametrize("layout", ["tcg_ex", "tdg_ex", "decoupled_async", "tcg"])
def test_no_two_gmis_share_a_stream_or_an_environment_seed(layout: str, tmp_path: Path) -> None:
    plan, _ = build_plan(compose_config("task=Cartpole", f"layout={layout}", "hardware=cpu", "num_gpus=2",
                                        "gmis_per_gpu=2", "seed=7"), tmp_path)
    seeds = [g.seed for g in plan.gmis]
    assert len(set(seeds)) == len(seeds) and plan.gmis[0].seed == 7
    envs = [s for g in plan.gmis for s in range(g.env_seed, g.env_seed + g.num_envs)]
    assert len(set(envs)) == len(envs) and min(envs) == 7
    assert "seed: 8" in plan.to_yaml()  # plan.yaml names every GMI's seeds


def test_across_nodes_every_gmi_has_its_own_seeds(tmp_path: Path) -> None:
    plan, _ = build_plan(compose_config("task=Cartpole", "hardware=cpu", "gmis_per_gpu=2", "launch.nnodes=2",
                                        "launch.rdzv_endpoint=127.0.0.1:29400", "seed=3"), tmp_path)
    assert [g.seed for g in plan.gmis] == [3, 4, 5, 6]
    assert [g.env_seed for g in plan.gmis] == [3 + sum(h.num_envs for h in plan.gmis[:i]) for i in range(4)]


def test_two_gmis_of_one_run_draw_different_action_noise(tmp_path: Path) -> None:
    """rl-games' runner seeds torch from each GMI's params (its ``seed``): the noise its policy samples differs."""
    plan, _ = build_plan(compose_config("task=Cartpole", "hardware=cpu", "gmis_per_gpu=2", "seed=5"), tmp_path)
    draws = []
    for g in plan.gmis:
        params = build_params(plan, g, train_dir=tmp_path / str(g.id))
        assert params["seed"] == g.seed and params["config"]["env_config"]["seed"] == g.env_seed
        Runner().load_config(params)  # rl-games seeds torch, numpy and random from params["seed"]
        draws.append(torch.randn(4))
    assert not torch.equal(draws[0], draws[1])
    Runner().load_config(build_params(plan, plan.gmis[0], train_dir=tmp_path / "again"))
    assert torch.equal(torch.randn(4), draws[0])  # and the same GMI draws the same noise again
