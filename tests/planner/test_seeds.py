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


def test_two_segments_of_one_run_never_share_an_environment_seed(tmp_path: Path) -> None:
    """Each start from a checkpoint seeds its simulators for its segment, on any partition a re-shape picks."""
    from gmiexp.planner.seeds import assign_seeds

    seen: dict[int, int] = {}
    for segment, gmis in enumerate([1, 2, 4, 2, 1]):  # re-shaped at every segment: the global batch stays
        plan, _ = build_plan(compose_config("task=Cartpole", "hardware=cpu", "batch.total_envs=64",
                                            f"gmis_per_gpu={gmis}", "seed=7"), tmp_path / str(segment))
        first = [g.env_seed for g in plan.gmis]
        assign_seeds(plan, segment)
        if segment == 0:
            assert [g.env_seed for g in plan.gmis] == first  # a run never restarted seeds as before
        for g in plan.gmis:
            for s in range(g.env_seed, g.env_seed + g.num_envs):
                assert s not in seen, f"segment {segment} GMI {g.id} repeats seed {s} of segment {seen[s]}"
                seen[s] = segment
    assert sorted(seen) == list(range(7, 7 + 5 * 64))  # and they follow on: segment k holds seed + 64k ...


def test_a_start_from_a_checkpoint_is_the_next_segment(tmp_path: Path) -> None:
    """requeue.resume (every start: checkpoint=, a requeue, a re-shape) sets the segment's seeds in the plan."""
    from gmiexp.launch.requeue import start_segment
    from gmiexp.rl.rlgames.checkpoint import RUN_KEY, run_segment

    assert run_segment(None) == 0 and run_segment({}) == 1 and run_segment({RUN_KEY: {"segment": 2}}) == 3
    torch.save({"epoch": 4, RUN_KEY: {"segment": 2}}, tmp_path / "ck.pth")
    plan, _ = build_plan(compose_config("task=Cartpole", "hardware=cpu", "gmis_per_gpu=2", "num_envs=16", "seed=7",
                                        f"checkpoint={tmp_path / 'ck.pth'}"), tmp_path / "run")
    assert start_segment(plan) == 3 and [g.env_seed for g in plan.gmis] == [7 + 3 * 32, 7 + 3 * 32 + 16]
    # the processes' streams: the segment's, where the checkpoint holds none for a GMI (runstate, carry)
    assert [g.seed for g in plan.gmis] == [7 + 3 * 2**16, 7 + 3 * 2**16 + 1]
    experience, _ = build_plan(compose_config("task=Cartpole", "hardware=cpu", "layout=tdg_ex", "seed=7",
                                              f"checkpoint={tmp_path / 'ck.pth'}"), tmp_path / "tdg")
    before = [g.env_seed for g in experience.gmis]
    assert start_segment(experience) == 0 and [g.env_seed for g in experience.gmis] == before  # keeps none


def test_no_gmi_of_a_later_segment_is_seeded_as_any_gmi_of_another() -> None:
    """A GMI a re-shape adds (1 -> 2 GMIs: GMI 1) draws its segment's streams, not epoch 0's (issue 42)."""
    from gmiexp.planner.seeds import SEGMENT_STRIDE, process_seed

    for seed in (0, 7, 2**32 - 3):
        seen = {}
        for segment in range(6):
            for gmi in (0, 1, 2, 3, SEGMENT_STRIDE - 1):
                s = process_seed(seed, gmi, segment)
                assert s not in seen, f"segment {segment} GMI {gmi} repeats the seed of {seen[s]}"
                assert 0 <= s < 2**32 or segment == 0  # numpy's legacy seeder (rl-games' runner) takes 32 bits
                seen[s] = (segment, gmi)
    assert process_seed(7, 3) == 10  # segment 0: seed + GMI, rl-games' and rsl_rl's multi-GPU habit
    with pytest.raises(ValueError, match="GMIs and segments 0..65535"):
        process_seed(7, SEGMENT_STRIDE, 1)
