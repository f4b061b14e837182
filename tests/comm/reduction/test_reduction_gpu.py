"""GPU paths (run with ``pytest -m gpu`` on a GPU host): pinned shared memory for CUDA gradients."""

import pytest
import torch
from reduction_helpers import check, inputs_for, plan_of, run_tag, run_threads, shm_leftovers

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("strategy", ["mpr", "har"])
def test_cuda_gradients_through_shared_memory(strategy):
    plan = plan_of([2, 2])
    xs = inputs_for(4, 300_001, 5)
    with run_tag() as tag:
        res = run_threads(plan, strategy, [x.cuda() for x in xs])
    assert all(r.is_cuda for r in res.values())
    check({k: v.cpu() for k, v in res.items()}, xs, plan.trainer_group, True)
    assert shm_leftovers(tag) == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_gradients_through_har_across_nodes():
    from reduction_helpers import new_tag, node_tags

    plan = plan_of([2, 2], nnodes=2)
    xs = inputs_for(8, 300_001, 6)
    tag = new_tag()
    res = run_threads(plan, "har", [x.cuda() for x in xs], tags=node_tags(tag, 2))
    check({k: v.cpu() for k, v in res.items()}, xs, plan.trainer_group, True)
    assert shm_leftovers(tag) == []
