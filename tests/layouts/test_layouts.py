"""Plan structure of tcg, tdg, tdg_ex and decoupled_async; bad input exits 2; the cost model."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config

from gmiexp.app import run
from gmiexp.config import LayoutConfig
from gmiexp.errors import ConfigError
from gmiexp.hardware import preset
from gmiexp.layouts import get
from gmiexp.layouts.layout import LayoutRequest
from gmiexp.plan import Plan
from gmiexp.planner.build import build_plan


def req(name: str, gpus: int, per: int, hw: str = "cpu", **layout: object) -> LayoutRequest:
    return LayoutRequest(layout=LayoutConfig(name=name, **layout), hardware=preset(hw), num_gpus=gpus,
                         gmis_per_gpu=per, num_envs=16)


def test_tcg_serving_gmis_colocate_simulator_and_agent() -> None:
    plan = get("tcg").build(req("tcg", 2, 3)).validate()
    assert [g.device for g in plan.gmis] == [0, 0, 0, 1, 1, 1]
    assert all(g.roles == ["simulator", "agent"] for g in plan.gmis)
    assert plan.trainer_group == [] and plan.channels == [] and get("tcg").default_role == "serve"


def test_tdg_pairs_simulator_and_agent_gmis_on_one_device() -> None:
    plan = get("tdg").build(req("tdg", 2, 4)).validate()
    assert [g.roles for g in plan.gmis[:2]] == [["simulator"], ["agent"]]
    assert plan.channels == [[1, 0], [3, 2], [5, 4], [7, 6]]
    for agent, sim in plan.channels:
        assert plan.gmi(agent).device == plan.gmi(sim).device
        assert plan.gmi(agent).num_envs == 0 and plan.gmi(sim).num_envs == 16


def test_tdg_ex_dedicated_trainers_per_gpu() -> None:
    plan = get("tdg_ex").build(req("tdg_ex", 2, 3, trainers_per_gpu=2)).validate()
    roles = [tuple(g.roles) for g in plan.gmis]
    per_gpu = [("simulator", "agent")] * 3 + [("trainer",)] * 2
    assert roles == per_gpu * 2
    assert plan.trainer_group == [3, 4, 8, 9]
    assert plan.channels == [[0, 3], [1, 4], [2, 3], [5, 8], [6, 9], [7, 8]]
    for a, t in plan.channels:  # forward path: agent and trainer share a device
        assert plan.gmi(a).device == plan.gmi(t).device
    assert get("tdg_ex").default_role == "tdg_ex"


def test_decoupled_async_splits_serving_and_training_gpus() -> None:
    plan = get("decoupled_async").build(req("decoupled_async", 4, 2, hw="dgx_a100", trainers_per_gpu=1,
                                      serving_gpus=3)).validate()
    serving = [g for g in plan.gmis if g.has("agent")]
    trainers = [g for g in plan.gmis if g.has("trainer")]
    assert {g.device for g in serving} == {0, 1, 2} and len(serving) == 6
    assert [g.device for g in trainers] == [3]
    assert plan.trainer_group == [g.id for g in trainers]
    assert plan.channels == [[a.id, trainers[0].id] for a in serving]
    half = get("decoupled_async").build(req("decoupled_async", 4, 1, hw="dgx_a100"))
    assert {g.device for g in half.gmis if g.has("agent")} == {0, 1}


def test_decoupled_async_on_cpu_uses_logical_devices() -> None:
    plan = get("decoupled_async").build(req("decoupled_async", 1, 2)).validate()
    assert [g.device for g in plan.gmis] == [0, 0, 1]
    assert plan.gmis[2].roles == ["trainer"]


@pytest.mark.parametrize(("name", "layout", "gpus", "per", "hw", "expected"), [
    ("tdg_ex", {"trainers_per_gpu": 0}, 1, 2, "cpu", "invalid layout.trainers_per_gpu: 0; valid: an integer >= 1"),
    ("tdg_ex", {"trainers_per_gpu": 3}, 1, 2, "cpu", "invalid layout.trainers_per_gpu: 3; valid: 1..2"),
    ("decoupled_async", {"trainers_per_gpu": 0}, 2, 2, "cpu", "invalid layout.trainers_per_gpu: 0"),
    ("decoupled_async", {}, 1, 2, "dgx_a100", "invalid num_gpus: 1; valid: 2..8 for layout=decoupled_async"),
    ("decoupled_async", {"serving_gpus": 2}, 2, 2, "dgx_a100", "invalid layout.serving_gpus: 2; valid: 1..1"),
    ("tdg", {}, 1, 3, "cpu", "invalid gmis_per_gpu: 3; valid: an even integer >= 2"),
])
def test_bad_layout_values(name: str, layout: dict, gpus: int, per: int, hw: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected.replace(".", r"\.").replace("(", r"\(")):
        get(name).build(req(name, gpus, per, hw=hw, **layout))


EXIT2 = [
    (["layout=tdg_ex", "layout.trainers_per_gpu=0"], "invalid layout.trainers_per_gpu: 0; valid: >= 1"),
    (["layout=decoupled_async", "num_envs=8192", "train.horizon_length=16"],
     "invalid trainer batch (train.horizon_length x num_envs): 131072; valid: 1..65536"),
    (["layout=decoupled_async", "channel.fields=[obs,actions,rewards,values,dones,colour]"],
     "invalid channel.fields: ['obs', 'actions', 'rewards', 'values', 'dones', 'colour']; valid: a list of at "
     "least 1; each item obs, actions, rewards, values, dones, neglogp"),
    (["layout=tdg_ex", "channel.fields=[obs,actions,rewards,values,dones]"], "the ppo trainer needs neglogp"),
    (["layout=decoupled_async", "async_train.publish_every=0"], "invalid async_train.publish_every: 0"),
    (["layout=decoupled_async", "async_train.algo=dqn"], "invalid async_train.algo: 'dqn'; valid: a2c, ppo"),
    (["layout=decoupled_async", "train.horizon_length=1"], "invalid train.horizon_length: 1; valid: >= 2"),
    (["layout=decoupled_async", "async_train.replay_ratio=-1"],
     "invalid async_train.replay_ratio: -1; valid: >= 0"),
    (["layout=tdg_ex", "async_train.replay_ratio=1", "async_train.replay_selection=newest"],
     "invalid async_train.replay_selection: 'newest'; valid: uniform, prioritized, topk, fifo, lifo"),
    (["layout=decoupled_async", "async_train.replay_ratio=1", "async_train.replay_eviction=random"],
     "invalid async_train.replay_eviction: 'random'; valid: fifo, lifo"),
    (["layout=decoupled_async", "channel.fields=[obs,actions,rewards,values,dones]"], "the ppo trainer needs neglogp"),
    (["layout=decoupled_async", "async_train.algo=a2c", "async_train.replay_ratio=2",
      "channel.fields=[obs,actions,rewards,values,dones]"],
     "the a2c trainer with replay (importance weight min(1, pi/mu)) needs neglogp"),
    (["layout=decoupled_async", "async_train.replay_ratio=1", "num_envs=64", "train.horizon_length=16",
      "channel.store_capacity=1000"],
     "invalid trainer batch (train.horizon_length x num_envs): 1024; valid: 1..1000 (channel.store_capacity rows)"),
]


@pytest.mark.parametrize(("overrides", "expected"), EXIT2)
def test_bad_input_exits_2_and_launches_nothing(overrides: list[str], expected: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code = run(compose_config("task=Cartpole", *overrides), tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in err
    assert not (tmp_path / "gmis").exists()


DEFAULT_ROLES = {"tcg_ex": "ppo", "tdg_ex": "tdg_ex", "decoupled_async": "a3c", "tcg": "serve", "tdg": "tdg"}


@pytest.mark.parametrize("layout", sorted(DEFAULT_ROLES))
def test_planner_picks_the_layouts_role_and_records_its_settings(layout: str, tmp_path: Path) -> None:
    plan, _ = build_plan(compose_config("task=Cartpole", f"layout={layout}", "hardware=cpu"), tmp_path)
    assert plan.role == DEFAULT_ROLES[layout]
    assert "cost_model" in plan.notes
    if layout in ("tdg_ex", "decoupled_async"):
        assert plan.channel is not None and plan.async_train is not None
        assert plan.channel.name == "multi" and plan.async_train.publish_every == 1
        assert Plan.from_yaml(plan.to_yaml()).channel == plan.channel  # typed again after plan.yaml
    else:
        assert plan.channel is None and plan.async_train is None
    if layout in ("tcg", "tdg"):
        assert plan.trainer_group == []


def test_user_role_is_kept(tmp_path: Path) -> None:
    plan, _ = build_plan(compose_config("task=Cartpole", "layout=tcg", "hardware=cpu",
                                        "role=gmiexp.rl.experience.serving:ServeRole"), tmp_path)
    assert plan.role == "gmiexp.rl.experience.serving:ServeRole"


def test_plan_mode_prints_the_cost_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(compose_config("mode=plan", "layout=tdg_ex", "hardware=dgx_a100", "num_gpus=2", "task=Ant"), tmp_path)
    out = capsys.readouterr().out
    assert code == 0
    assert "cost_model" in out and "training (Table 5, eq. 3)" in out and "speedup_colocated" in out
