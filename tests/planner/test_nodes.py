"""Nodes of a run: node rank from the user or the scheduler, node-major GMI ids, bad node fields exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config, run_cli, run_here

from gmiexp.config import LaunchConfig
from gmiexp.errors import ConfigError
from gmiexp.planner.build import build_plan
from gmiexp.planner.nodes import gmi_for_local_rank, resolve_nodes

TWO = ["launch.nnodes=2", "launch.rdzv_endpoint=127.0.0.1:29400"]


def plan_of(tmp_path: Path, *overrides: str):
    return build_plan(compose_config("hardware=cpu", "task=Cartpole", *overrides), tmp_path)[0]


def test_gmis_are_numbered_node_major_on_the_same_local_devices(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "num_gpus=2", "gmis_per_gpu=2", *TWO, "launch.node_rank=1")
    assert [(g.id, g.node, g.device, g.local_index) for g in plan.gmis] == [
        (0, 0, 0, 0), (1, 0, 0, 1), (2, 0, 1, 0), (3, 0, 1, 1),
        (4, 1, 0, 0), (5, 1, 0, 1), (6, 1, 1, 0), (7, 1, 1, 1)]
    assert plan.trainer_group == list(range(8))
    assert plan.gpu_map() == [[0, 1], [2, 3], [4, 5], [6, 7]]  # one entry per GPU of every node
    assert plan.node_map() == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
    assert [g.id for g in plan.local_gmis] == [4, 5, 6, 7] and plan.devices == [0, 1]
    assert gmi_for_local_rank(plan, 2) == 6
    assert plan.gmis[5].env == plan.gmis[1].env  # the same local GMI, realised by this node's backend


def test_every_node_gets_the_same_plan_id(tmp_path: Path) -> None:
    ids = {plan_of(tmp_path / str(r), *TWO, f"launch.node_rank={r}").plan_id for r in (0, 1)}
    assert len(ids) == 1
    assert plan_of(tmp_path / "one").plan_id not in ids


def test_node_rank_comes_from_slurm_then_torchrun() -> None:
    lc = resolve_nodes(LaunchConfig(nnodes=3, rdzv_endpoint="head:29400"), {"SLURM_NODEID": "2", "PET_NODE_RANK": "1",
                                                                             "SLURM_JOB_ID": "777"})
    assert (lc.node_rank, lc.rdzv_id, lc.local_addr) == (2, "777", None)
    lc = resolve_nodes(LaunchConfig(nnodes=3, rdzv_endpoint="127.0.0.1:29400"), {"PET_NODE_RANK": "1"})
    assert (lc.node_rank, lc.rdzv_id, lc.local_addr) == (1, "gmiexp", "127.0.0.1")
    lc = resolve_nodes(LaunchConfig(nnodes=1), {"SLURM_NODEID": "3"})  # a one-node run ignores the scheduler's
    assert lc.node_rank == 0


@pytest.mark.parametrize(("launch", "env", "named"), [
    (dict(nnodes=2, node_rank=2, rdzv_endpoint="h:1"), {}, "launch.node_rank: 2"),
    (dict(nnodes=2, rdzv_endpoint="h:1"), {"SLURM_NODEID": "5"}, "SLURM_NODEID: 5"),
    (dict(nnodes=2, node_rank=0), {}, "launch.rdzv_endpoint=null"),
    (dict(nnodes=2, node_rank=0, rdzv_endpoint="h:0"), {}, "port"),
    (dict(nnodes=2, node_rank=0, rdzv_endpoint="h:1", inprocess=True), {}, "launch.inprocess"),
])
def test_bad_node_fields_are_named(launch: dict, env: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        resolve_nodes(LaunchConfig(**launch), env)


#: the first case through a real ``python -m gmiexp``; the others, refused by the same check, run the job in this
#: process (only their message differs)
@pytest.mark.parametrize(("overrides", "named", "cli"), [
    (["launch.nnodes=2", "launch.node_rank=2", "launch.rdzv_endpoint=127.0.0.1:29400"], "launch.node_rank: 2", True),
    (["launch.nnodes=2", "launch.node_rank=1"], "launch.rdzv_endpoint=null", False),
    (["launch.nnodes=2", "launch.rdzv_endpoint=nohostport"], "launch.rdzv_endpoint", False),
    (["launch.nnodes=0"], "launch.nnodes: 0", False),
])
def test_the_cli_refuses_bad_node_fields_with_exit_2(tmp_path: Path, overrides: list[str], named: str, cli: bool,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    args = ["hardware=cpu", "task=Cartpole", *overrides]
    r = run_cli(*args, f"hydra.run.dir={tmp_path}") if cli else run_here(capsys, tmp_path, *args)
    assert r.returncode == 2, r.stderr
    assert named in r.stderr and "valid" in r.stderr
    assert not (tmp_path / "plan.yaml").exists() and not (tmp_path / "logs").exists()
