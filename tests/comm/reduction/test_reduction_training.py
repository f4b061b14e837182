"""A small data-parallel training loop on a 2x2 logical layout: HAR keeps every GMI's weights identical
and tracks a reference that averages the gradients in float64, step for step."""

import copy
import threading

import torch
from reduction_helpers import make, plan_of, run_tag, shm_leftovers

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.reduction.collective import LocalWorld


def model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(64, 8, generator=g)
    return x, torch.stack([x[:, :4].sum(1), x[:, 4:].prod(1)], 1)


def flat_grad(net, rank, step):
    net.zero_grad()
    x, y = batch(rank, step)
    torch.nn.functional.mse_loss(net(x), y).backward()
    return torch.cat([p.grad.reshape(-1) for p in net.parameters()])


def apply(net, flat, lr=0.05):
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(torch.nn.utils.parameters_to_vector(net.parameters()) - lr * flat,
                                            net.parameters())


def test_har_training_keeps_gmis_identical_and_matches_reference():
    plan = plan_of([2, 2])
    steps, world = 6, LocalWorld(4, timeout_s=30)
    weights, errors = {}, []
    init = model()  # the global RNG is shared by threads: build once, copy per GMI

    def gmi(rank):
        try:
            net = copy.deepcopy(init)
            red = make("har", GMIManager(plan, rank), plan.trainer_group, world.collective(rank))
            hist = []
            for s in range(steps):
                apply(net, red.allreduce_(flat_grad(net, rank, s)))
                hist.append(torch.nn.utils.parameters_to_vector(net.parameters()).detach().clone())
            red.close()
            weights[rank] = hist
        except BaseException as e:
            errors.append(e)

    with run_tag() as tag:
        ts = [threading.Thread(target=gmi, args=(r,)) for r in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
    assert not errors, errors
    ref = copy.deepcopy(init)
    for s in range(steps):
        grads = torch.stack([flat_grad(ref, r, s).double() for r in range(4)])
        apply(ref, grads.mean(0).float())
        w_ref = torch.nn.utils.parameters_to_vector(ref.parameters()).detach()
        for r in range(4):
            assert torch.equal(weights[r][s], weights[0][s]), f"GMI {r} diverged at step {s}"
        assert torch.allclose(weights[0][s], w_ref, atol=1e-5), f"step {s} off the reference"
    assert not torch.equal(weights[0][0], weights[0][-1])  # it did train
    assert shm_leftovers(tag) == []
