"""A global batch (batch.total_envs / total_minibatch) is shared evenly by every partition, or refused naming those
that can; a re-shaped run's checkpoints count as the same training."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config

from gmiexp.errors import ConfigError
from gmiexp.launch.requeue import training_key
from gmiexp.planner.build import build_plan
from gmiexp.planner.partition import gmis_per_gpu


def plan_of(tmp_path: Path, *overrides: str):
    return build_plan(compose_config("mode=plan", "task=Cartpole", *overrides), tmp_path)[0]


@pytest.mark.parametrize("layout", ["tcg_ex", "tdg_ex", "decoupled_async"])
@pytest.mark.parametrize("per_gpu", [1, 2, 4])
def test_every_partition_steps_the_same_environments_and_minibatch(tmp_path: Path, layout: str, per_gpu: int) -> None:
    plan = plan_of(tmp_path, f"layout={layout}", f"gmis_per_gpu={per_gpu}", "batch.total_envs=64",
                   "batch.total_minibatch=256")
    sims = [g for g in plan.gmis if g.has("simulator")]
    trainers = len(plan.trainer_group)
    assert sum(g.num_envs for g in sims) == 64 and len({g.num_envs for g in sims}) == 1
    assert plan.train.minibatch_size * trainers == 256
    assert plan.global_batch.total_envs == 64 and plan.global_batch.total_minibatch == 256
    assert gmis_per_gpu(plan) == per_gpu
    assert per_gpu in plan.global_batch.reachable


@pytest.mark.parametrize("layout", ["tcg_ex", "tdg_ex"])
def test_total_envs_alone_gives_every_partition_the_same_minibatch(tmp_path: Path, layout: str) -> None:
    """One GMI's minibatch on the whole batch (train.minibatch_size fitted to it), whatever the GMIs: the default used
    to multiply it by the starting partition's trainers, so 2 GMIs trained twice the minibatch of 1."""
    plans = [plan_of(tmp_path, f"layout={layout}", f"gmis_per_gpu={n}", "batch.total_envs=64",
                     "train.horizon_length=16", "train.minibatch_size=512") for n in (1, 2, 4)]
    assert [p.global_batch.total_minibatch for p in plans] == [512, 512, 512]
    assert [p.train.minibatch_size * len(p.trainer_group) for p in plans] == [512, 512, 512]
    assert plan_of(tmp_path, "gmis_per_gpu=2", "batch.total_envs=8", "train.horizon_length=16",
                   "train.minibatch_size=512").global_batch.total_minibatch == 128  # fitted to 8 x 16


def test_without_a_global_batch_num_envs_is_per_gmi(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "gmis_per_gpu=2", "num_envs=8")
    assert [g.num_envs for g in plan.gmis] == [8, 8] and plan.global_batch is None


def test_an_uneven_partition_is_refused_naming_the_reachable_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"invalid partition for batch.total_envs=6 .*6 environments do not divide "
                                          r"evenly over 4 simulator GMIs; valid: gmis_per_gpu in \[1, 2, 3\]"):
        plan_of(tmp_path, "gmis_per_gpu=4", "batch.total_envs=6", "batch.total_minibatch=6")


def test_total_minibatch_without_total_envs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid batch.total_minibatch=64 without batch.total_envs"):
        plan_of(tmp_path, "batch.total_minibatch=64")


def test_a_reshaping_run_fixes_its_starting_batch_as_the_global_one(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "gmis_per_gpu=2", "num_envs=8", "launch.reshape=request")
    assert plan.global_batch.total_envs == 16
    assert plan.global_batch.total_minibatch == 2 * plan.train.minibatch_size


def test_the_partition_is_not_the_training_with_a_global_batch(tmp_path: Path) -> None:
    """Resume (so a re-shape) accepts a checkpoint of another partition of the same global batch only."""
    one = plan_of(tmp_path, "gmis_per_gpu=1", "batch.total_envs=16", "batch.total_minibatch=64")
    two = plan_of(tmp_path, "gmis_per_gpu=2", "batch.total_envs=16", "batch.total_minibatch=64")
    other = plan_of(tmp_path, "gmis_per_gpu=2", "batch.total_envs=32", "batch.total_minibatch=64")
    assert training_key(one) == training_key(two) != training_key(other)
    per_gmi = [plan_of(tmp_path, f"gmis_per_gpu={n}", "num_envs=8") for n in (1, 2)]
    assert training_key(per_gmi[0]) != training_key(per_gmi[1])


@pytest.mark.parametrize(("overrides", "msg"), [
    (["layout=tcg"], "invalid launch.reshape=request with layout=tcg: a serving layout"),
    (["launch.nnodes=2", "launch.node_rank=0", "launch.rdzv_endpoint=127.0.0.1:29400"],
     "invalid launch.reshape=request with launch.nnodes=2"),
    (["launch.inprocess=true", "gmis_per_gpu=1"], "invalid launch.reshape=request with launch.inprocess=true"),
])
def test_reshape_is_refused_where_it_cannot_run(tmp_path: Path, overrides: list[str], msg: str) -> None:
    with pytest.raises(ConfigError, match=msg):
        plan_of(tmp_path, "launch.reshape=request", *overrides)


def test_the_global_batch_is_typed_and_plan_yaml_keeps_its_form(tmp_path: Path) -> None:
    """``plan.global_batch`` is a GlobalBatch (None without one): plan.yaml holds the same mapping as before (an
    experience layout's split only where there is one; ``{}`` for none) and loads back typed."""
    from gmiexp.plan import Plan
    from gmiexp.plan.model import GlobalBatch

    plan = plan_of(tmp_path, "gmis_per_gpu=2", "batch.total_envs=16", "batch.total_minibatch=64")
    assert plan.global_batch == GlobalBatch(total_envs=16, total_minibatch=64, reachable=[1, 2, 4], gmis_per_gpu=2,
                                            envs_per_gmi=[16, 8, 4])
    assert plan.to_dict()["global_batch"] == {"total_envs": 16, "total_minibatch": 64, "reachable": [1, 2, 4],
                                              "gmis_per_gpu": 2, "envs_per_gmi": [16, 8, 4]}
    loaded = Plan.load(plan.save(tmp_path / "plan.yaml"))
    assert isinstance(loaded.global_batch, GlobalBatch) and loaded.global_batch == plan.global_batch
    assert loaded.plan_id == plan.plan_id and loaded.global_batch.envs_for(4) == 4 and loaded.global_batch.envs_for(3) \
        is None
    split = plan_of(tmp_path, "layout=tdg_ex", "gmis_per_gpu=2", "batch.total_envs=16")
    assert list(split.to_dict()["global_batch"])[-2:] == ["trainers_per_gpu", "trainer_splits"]
    assert Plan.load(split.save(tmp_path / "split.yaml")).global_batch.trainer_splits == [1, 2]
    none = plan_of(tmp_path, "gmis_per_gpu=2")
    assert none.global_batch is None and none.to_dict()["global_batch"] == {}
    assert "global_batch: {}" in none.to_yaml() and Plan.load(none.save(tmp_path / "none.yaml")).global_batch is None


def test_the_per_gmi_batch_of_the_plan_and_of_every_reachable_partition_comes_from_one_split(tmp_path: Path) -> None:
    from gmiexp.planner.partition import per_gmi

    plan = plan_of(tmp_path, "layout=tdg_ex", "gmis_per_gpu=2", "batch.total_envs=32", "batch.total_minibatch=128")
    share = per_gmi(plan, plan.global_batch)
    assert share is not None and share.num_envs == plan.global_batch.envs_for(2) == 16
    assert [g.num_envs for g in plan.gmis if g.has("simulator")] == [share.num_envs] * 2
    assert plan.train.minibatch_size == share.minibatch_size == 128 // len(plan.trainer_group)
    for n in plan.global_batch.reachable:
        other = plan_of(tmp_path, "layout=tdg_ex", f"gmis_per_gpu={n}", "batch.total_envs=32",
                        "batch.total_minibatch=128")
        assert per_gmi(other, other.global_batch).num_envs == plan.global_batch.envs_for(n)


def test_replan_plans_a_typed_partition_of_the_running_plan_s_global_batch(tmp_path: Path) -> None:
    """What a re-shape asks the planner for: the Plan and a Partition; the config stays in the planner."""
    from gmiexp.planner.build import replanner
    from gmiexp.planner.partition import Partition

    cfg = compose_config("task=Cartpole", "layout=tdg_ex", "gmis_per_gpu=2", "num_envs=8", "launch.reshape=request")
    plan, _ = build_plan(cfg, tmp_path)
    replan = replanner(cfg, tmp_path)
    four, backend = replan(plan, Partition(4))
    assert gmis_per_gpu(four) == 4 and backend.name == plan.backend
    assert (four.global_batch.total_envs, four.global_batch.total_minibatch) == (16, plan.global_batch.total_minibatch)
    assert [g.num_envs for g in four.gmis if g.has("simulator")] == [4] * 4
    assert cfg.gmis_per_gpu == 2 and cfg.batch.total_envs is None  # the run's config is not the partition's
    split = Partition(2).moved(2, {"layout.trainers_per_gpu": 2})
    assert split == Partition(2, trainers_per_gpu=2) and split.moved(4) == Partition(4, trainers_per_gpu=2)
    two, _ = replan(four, split)
    assert len(two.trainer_group) == 2 and two.global_batch.trainers_per_gpu == 2
    assert two.train.minibatch_size * 2 == plan.global_batch.total_minibatch
    with pytest.raises(ConfigError, match=r"invalid partition for batch.total_envs=16 .*valid: gmis_per_gpu in"):
        replan(plan, Partition(3))
    with pytest.raises(ConfigError, match="invalid re-shape override train.gamma; valid: hardware.cpus, "
                                          "backend.sm_percent, layout.trainers_per_gpu"):
        Partition(2).moved(2, {"train.gamma": 0.9})


def test_a_partition_dev_shm_cannot_hold_is_refused_so_the_re_shape_rolls_back(tmp_path: Path, monkeypatch) -> None:
    """4 GMIs of tdg_ex need twice the rings of 2 (before: the new partition started and died of ShmFull)."""
    from gmiexp.planner import resources
    from gmiexp.planner.build import replanner
    from gmiexp.planner.partition import Partition

    cfg = compose_config("task=Cartpole", "layout=tdg_ex", "gmis_per_gpu=2", "num_envs=8", "launch.reshape=request",
                         "channel.target_bytes=65536")
    plan, _ = build_plan(cfg, tmp_path)
    need = resources.shm_need(plan).total
    monkeypatch.setattr(resources, "free_bytes", lambda path: need + 4096)  # room for the 2 GMIs' rings, no more
    replan = replanner(cfg, tmp_path)
    assert gmis_per_gpu(replan(plan, Partition(2))[0]) == 2
    with pytest.raises(ConfigError, match=r"/dev/shm has .* free; this plan needs about /dev/shm: .*channels"):
        replan(plan, Partition(4))
