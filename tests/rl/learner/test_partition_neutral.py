"""One update by G trainer GMIs, each on its share of a batch, equals one update of 1 GMI on the whole batch.

What makes a re-shape (gmiexp.launch.elastic) learning-neutral for the experience layouts: gradients are
weighted by rows and summed over the group, the KL that drives the adaptive learning rate is summed with them,
and advantages are normalised over every trainer's rows. The group sum here is the same sum every reduction
(allreduce, MPR, MRR, HAR) computes, done in threads; tests/comm/reduction checks each reduction's sum.
"""

from __future__ import annotations

import threading

import pytest
import torch
from reduction_helpers import ThreadSum
from torch import nn

from gmiexp.config import TrainConfig
from gmiexp.rl.learner.update import Learner

HORIZON, ENVS = 3, 8


class Linear(nn.Module):
    """A 3-action policy over 2-d observations with a linear critic."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.pi, self.v = nn.Linear(2, 3), nn.Linear(2, 1)

    def forward(self, d: dict) -> dict:
        dist = torch.distributions.Categorical(logits=self.pi(d["obs"]))
        return {"prev_neglogp": -dist.log_prob(d["prev_actions"]), "values": self.v(d["obs"]),
                "entropy": dist.entropy()}


def batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    n = HORIZON * ENVS  # rows t * ENVS + e
    return {"obs": torch.randn(n, 2, generator=g), "actions": torch.randint(0, 3, (n,), generator=g),
            "rewards": torch.randn(n, generator=g), "values": torch.randn(n, generator=g),
            "dones": (torch.rand(n, generator=g) < 0.2).to(torch.uint8),
            "neglogp": torch.rand(n, generator=g) + 0.5}


def shard(b: dict[str, torch.Tensor], envs: list[int]) -> dict[str, torch.Tensor]:
    rows = torch.tensor([t * ENVS + e for t in range(HORIZON) for e in envs])
    return {k: v[rows] for k, v in b.items()}


def update(world: int, train: TrainConfig) -> list[tuple[Linear, Learner]]:
    b, group, out = batch(), ThreadSum(world), []
    per = ENVS // world
    for r in range(world):
        model = Linear()
        learner = Learner(model, torch.optim.Adam(model.parameters(), lr=train.learning_rate), train,
                          group.for_rank(r), ppo=True, num_minibatches=1, world=world, leader=r == 0,
                          device=torch.device("cpu"), seed=0, max_frames=10_000)
        out.append((model, learner, shard(b, list(range(r * per, (r + 1) * per)))))
    threads = [threading.Thread(target=lambda lr=lr, part=part: lr.step([(per, part)], done=True))
               for _, lr, part in out]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return [(m, lr) for m, lr, _ in out]


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("normalize_advantage", [True, False])
def test_g_trainers_make_the_update_of_one(world: int, normalize_advantage: bool) -> None:
    train = TrainConfig(horizon_length=HORIZON - 1, mini_epochs=1, learning_rate=0.01, lr_schedule="adaptive",
                        kl_threshold=1e-6, normalize_advantage=normalize_advantage, normalize_value=False,
                        truncate_grads=True, grad_norm=0.5)
    (one, l1), = update(1, train)
    for model, learner in update(world, train):
        for a, b in zip(one.parameters(), model.parameters(), strict=True):
            assert torch.allclose(a, b, atol=1e-6), (a, b)
        assert learner.last_kl == pytest.approx(l1.last_kl, rel=1e-5)
        assert learner.lr == pytest.approx(l1.lr) and l1.lr != 0.01  # the adaptive schedule moved, alike
