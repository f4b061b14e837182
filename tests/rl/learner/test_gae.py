"""The learner's GAE against a hand-worked rollout and a plain Python loop."""

from __future__ import annotations

import pytest
import torch

from gmiexp.rl.learner.gae import gae


def test_gae_matches_a_hand_computed_rollout() -> None:
    # horizon 3, one env: records 0 and 1 are trained, record 2 bootstraps; done after record 0
    batch = {"values": torch.tensor([1.0, 2.0, 3.0]), "rewards": torch.tensor([1.0, 1.0, 0.0]),
             "dones": torch.tensor([1, 0, 0], dtype=torch.uint8), "obs": torch.zeros(3, 4),
             "actions": torch.zeros(3, dtype=torch.long), "neglogp": torch.zeros(3)}
    g, lam = 0.9, 0.5
    out = gae(batch, 3, 1, g, lam)
    d1 = 1.0 + g * 3.0 - 2.0  # record 1 bootstraps from record 2's value
    d0 = 1.0 - 1.0  # record 0 ends its episode: no bootstrap, no carry
    assert torch.allclose(out["advantages"], torch.tensor([d0, d1]))
    assert torch.allclose(out["returns"], torch.tensor([d0 + 1.0, d1 + 2.0]))
    assert out["obs"].shape == (2, 4)


def slow_gae(values: list[list[float]], rewards: list[list[float]], dones: list[list[int]], gamma: float,
             lam: float) -> list[list[float]]:
    """Textbook GAE, one environment and one step at a time, plain floats."""
    horizon, n = len(values), len(values[0])
    adv = [[0.0] * n for _ in range(horizon - 1)]
    for e in range(n):
        carry = 0.0
        for t in reversed(range(horizon - 1)):
            nonterminal = 0.0 if dones[t][e] else 1.0
            delta = rewards[t][e] + gamma * values[t + 1][e] * nonterminal - values[t][e]
            carry = delta + gamma * lam * nonterminal * carry
            adv[t][e] = carry
    return adv


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_equals_a_plain_python_loop(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    horizon, n, gamma, lam = 7, 5, 0.97, 0.9
    values = torch.randn(horizon, n, generator=g)
    rewards = torch.randn(horizon, n, generator=g)
    dones = (torch.rand(horizon, n, generator=g) < 0.3).to(torch.uint8)
    batch = {"values": values.reshape(-1), "rewards": rewards.reshape(-1), "dones": dones.reshape(-1),
             "obs": torch.zeros(horizon * n, 3), "actions": torch.zeros(horizon * n, dtype=torch.long)}
    out = gae(batch, horizon, n, gamma, lam)
    want = torch.tensor(slow_gae(values.tolist(), rewards.tolist(), dones.tolist(), gamma, lam))
    assert torch.allclose(out["advantages"], want.reshape(-1), atol=1e-5)
    assert torch.allclose(out["returns"], (want + values[:-1]).reshape(-1), atol=1e-5)
    assert "neglogp" not in out and out["obs"].shape == ((horizon - 1) * n, 3)
