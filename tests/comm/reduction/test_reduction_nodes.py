"""Reductions across nodes: every strategy equals the float64 sum on every member, bit-identical across members.

Nodes are faithful: each node's GMIs name their shared-memory segments with their own node's run tag (each
node's launcher sets its own GMIEXP_RUN_TAG), so a strategy whose arena joined GMIs of two nodes would
never meet and time out instead of passing.
"""


import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reduction_helpers import (
    check,
    inputs_for,
    new_tag,
    node_manager,
    node_tags,
    plan_of,
    run_threads,
    shm_leftovers,
    spawn_members,
)

from gmiexp.comm.reduction import resolve, serving
from gmiexp.comm.reduction.collective import LocalWorld
from gmiexp.comm.reduction.har import Hierarchical
from gmiexp.comm.reduction.mpr import MPR
from gmiexp.costmodel.algorithm1 import mrr_limit, select_nodes
from gmiexp.errors import ConfigError

SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
sizes = st.integers(0, 50).map(lambda k: max(1, int(round(10 ** (k / 10)))))  # 1..1e5, log-uniform


def across_nodes(strategy: str, nnodes: int, counts: list[int], numel: int, average: bool, seed: int = 0) -> None:
    tag = new_tag()
    tags = node_tags(tag, nnodes)
    plan = plan_of(counts, nnodes=nnodes)
    xs = inputs_for(plan.world_size, numel, seed)
    res = run_threads(plan, strategy, xs, average=average, tags=tags)
    check(res, xs, plan.trainer_group, average)
    assert shm_leftovers(tag) == []


@pytest.mark.parametrize("strategy", ["har", "mrr"])
def test_two_nodes_two_gpus_two_gmis(strategy):
    across_nodes(strategy, 2, [2, 2], 100_003, average=False)
    across_nodes(strategy, 2, [2, 2], 4097, average=True, seed=1)


@SETTINGS
@given(nnodes=st.integers(2, 3), counts=st.lists(st.integers(1, 3), min_size=1, max_size=3), numel=sizes,
       average=st.booleans())
def test_har_across_nodes_equals_float64_reference(nnodes, counts, numel, average):
    across_nodes("har", nnodes, counts, numel, average)


@SETTINGS
@given(nnodes=st.integers(2, 3), g=st.integers(1, 2), t=st.integers(1, 3), numel=sizes, average=st.booleans())
def test_mrr_across_nodes_equals_float64_reference(nnodes, g, t, numel, average):
    if t > nnodes * g:  # the rings' representatives need distinct GPUs of all nodes
        with pytest.raises(Exception, match="GMIs per GPU <= GPUs"):
            across_nodes("mrr", nnodes, [t] * g, numel, average)
        return
    across_nodes("mrr", nnodes, [t] * g, numel, average)


class Recorder:
    """A collective that records the groups it is asked to prepare (one GMI per GPU: no arena, no barrier met)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.groups: list[list[int]] = []

    def prepare(self, groups) -> None:
        self.groups = [list(g) for g in groups]

    def barrier(self) -> None:
        return None


def test_har_levels_gpu_leaders_per_node_then_one_leader_per_node():
    nodes = plan_of([1, 1, 1], nnodes=2).node_map()
    tree = Hierarchical(nodes, 4, Recorder(4), "x")
    assert tree.levels == 3 and tree.arena is None
    assert tree.leaders == [3, 4, 5] and tree.node_leaders == [0, 3]  # its node's GPU leaders; one per node
    assert tree.coll.groups == [[0, 1, 2], [3, 4, 5], [0, 3]]
    one = Hierarchical(plan_of([1, 1, 1]).node_map(), 1, Recorder(1), "x")
    assert one.levels == 2 and one.coll.groups == [[0, 1, 2], [0]]  # one node: the paper's two levels
    uneven = Hierarchical(plan_of([3, 1], nnodes=2).node_map(), 7, Recorder(7), "x")
    assert uneven.leaders == [4, 7] and uneven.node_leaders == [0, 4] and uneven.local == [7]


def test_mpr_stays_inside_a_node():
    plan = plan_of([2], nnodes=2)
    assert "mpr" not in serving(plan) and serving(plan) == ["mrr", "har", "allreduce"]
    with pytest.raises(ConfigError) as e:
        resolve("mpr", plan)
    msg = str(e.value)
    assert "'mpr'" in msg and "on 2 nodes" in msg and "valid for this layout: mrr, har, allreduce, auto" in msg
    assert ConfigError.exit_code == 2
    with pytest.raises(ConfigError, match="MPR stays inside a node"):
        MPR(node_manager(plan, 0, None), plan.trainer_group, collective=LocalWorld(2).collective(0))
    # members of one node only: MPR serves them
    assert resolve("mpr", plan_of([2], trainers=[2, 3], nnodes=2))[0] == "mpr"


def test_algorithm1_across_nodes():
    est = {"mpr": None, "mrr": 2.0, "har": 1.0}
    assert select_nodes([[[0, 1]]], est)[0] == "mpr"  # one node: the paper's Algorithm 1, unchanged
    assert select_nodes([[[0, 1], [2, 3]]], est)[0] == "mrr"
    assert select_nodes([[[0, 1]], [[2, 3]]], est)[0] == "har"  # MRR serves, Table 2 prefers HAR
    assert select_nodes([[[0, 1]], [[2, 3]]], {"mrr": 1.0, "har": 2.0})[0] == "mrr"
    name, why = select_nodes([[[0, 1, 2]], [[3, 4, 5]]], {"mrr": 0.0, "har": 9.0})
    assert name == "har" and "3 GMIs per GPU > 2 GPUs" in why  # t > G: MRR cannot serve, whatever it costs
    assert select_nodes([[[0, 1]], [[2]]], {"mrr": 0.0, "har": 9.0})[0] == "har"  # uneven
    # the whole plan: trainers on 2 nodes, MPR never chosen; trainers on one node: the paper's rules
    name, why = resolve("auto", plan_of([2, 2], nnodes=2))
    assert name in ("mrr", "har") and "across 2 nodes" in why and "Table 2" in why
    assert resolve("auto", plan_of([2], trainers=[2, 3], nnodes=2))[0] == "mpr"
    assert mrr_limit(plan_of([3], nnodes=3).gpu_map()) is None  # 3 GMIs per GPU on 3 GPUs of 3 nodes


def launch_nodes(counts, nnodes, strategies, numel, tmp_path):
    world = sum(counts) * nnodes
    procs, tag = spawn_members(counts, strategies, numel, tmp_path, nnodes=nnodes, join_s=180)
    assert [p.exitcode for p in procs] == [0] * world
    xs = inputs_for(world, numel, seed=7)
    for s in strategies:
        for kind, average in (("sum", False), ("mean", True)):
            res = {r: torch.from_numpy(np.load(tmp_path / f"{s}_{r}_{kind}.npy")) for r in range(world)}
            check(res, xs, list(range(world)), average)
    assert shm_leftovers(tag) == []


def test_every_strategy_across_two_nodes_in_processes(tmp_path):
    """2 nodes x 2 logical GPUs x 2 GMIs as 8 processes over real gloo, each node's GMIs with its own run tag."""
    plan = plan_of([2, 2], nnodes=2)
    launch_nodes([2, 2], 2, [*serving(plan), "auto"], 50_001, tmp_path)
