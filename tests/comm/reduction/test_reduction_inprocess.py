"""Every strategy, members as threads of one process (shared memory + LocalCollective), on many layouts."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reduction_helpers import check, inputs_for, plan_of, run_tag, run_threads, shm_leftovers

from gmiexp.costmodel.algorithm1 import mrr_limit

layouts = st.lists(st.integers(1, 4), min_size=1, max_size=4)  # GMIs on each of 1-4 GPUs, even or uneven
sizes = st.integers(0, 60).map(lambda k: max(1, int(round(10 ** (k / 10)))))  # 1..1e6, log-uniform
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run_and_check(strategy, counts, numel, average, seed=0, calls=1):
    with run_tag() as tag:
        plan = plan_of(counts)
        xs = inputs_for(plan.world_size, numel, seed)
        res = run_threads(plan, strategy, xs, average=average, calls=calls)
        check(res, xs, plan.trainer_group, average)
    assert shm_leftovers(tag) == []


@SETTINGS
@given(counts=layouts, numel=sizes, average=st.booleans())
def test_mpr_equals_float64_reference(counts, numel, average):
    run_and_check("mpr", counts, numel, average)


@SETTINGS
@given(counts=layouts, numel=sizes, average=st.booleans())
def test_har_equals_float64_reference(counts, numel, average):
    run_and_check("har", counts, numel, average)


@SETTINGS
@given(g=st.integers(1, 4), t=st.integers(1, 4), numel=sizes, average=st.booleans())
def test_mrr_equals_float64_reference(g, t, numel, average):
    counts = [t] * g
    if mrr_limit([[0] * t] * g) is not None:
        with pytest.raises(Exception, match="GMIs per GPU <= GPUs"):
            run_and_check("mrr", counts, numel, average)
        return
    run_and_check("mrr", counts, numel, average)


@pytest.mark.parametrize("strategy", ["mpr", "har"])
def test_large_tensor_on_uneven_layout_repeated(strategy):
    run_and_check(strategy, [3, 1, 2], 1_000_003, True, calls=3)


def test_non_member_gmis_take_part_in_construction_only():
    plan = plan_of([2, 2], trainers=[0, 1, 3])
    xs = inputs_for(4, 1000, 3)
    with run_tag() as tag:
        for strategy in ("mpr", "har"):
            res = run_threads(plan, strategy, xs)
            check(res, xs, [0, 1, 3], True)
            assert torch.equal(res[2], xs[2])  # untouched
    assert shm_leftovers(tag) == []
