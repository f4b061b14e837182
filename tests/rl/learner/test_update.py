"""One PPO / A2C step of the learner against a hand computation, on a two-action policy with a scalar critic."""

from __future__ import annotations

import math

import pytest
import torch
from coin_policy import ACTIONS, MU, REWARDS, Coin, rollout

from gmiexp.config import TrainConfig
from gmiexp.rl.learner.update import Learner

LR, CLIP, CRITIC = 0.1, 0.2, 2.0


def hand_gradient(ppo: bool) -> tuple[list[float], float]:
    """d loss / d theta and d loss / d v at theta = 0, v = 0, written out row by row."""
    g_theta = [0.0, 0.0]
    g_v = 0.0
    for a, mu, adv in zip(ACTIONS, MU, REWARDS, strict=True):
        ratio = 0.5 / mu
        if ppo:
            # loss max(-A r, -A clip(r)): the clipped branch (constant) wins when A > 0 and r > 1 + clip,
            # or A < 0 and r < 1 - clip; otherwise d(-A r)/d theta_j = -A r (1[a = j] - 1/2)
            clipped = (adv > 0 and ratio > 1 + CLIP) or (adv < 0 and ratio < 1 - CLIP)
            scale = 0.0 if clipped else -adv * ratio
        else:  # A2C: loss A * neglogp, d/d theta_j = -A (1[a = j] - 1/2)
            scale = -adv
        for j in range(2):
            g_theta[j] += scale * ((1.0 if a == j else 0.0) - 0.5)
        g_v += 0.5 * CRITIC * -2.0 * (adv - 0.0)  # critic (R - v)^2 with R = A + v = A
    n = len(ACTIONS)
    return [g / n for g in g_theta], g_v / n


@pytest.mark.parametrize("ppo", [True, False])
def test_one_step_equals_the_hand_computation(ppo: bool) -> None:
    train = TrainConfig(horizon_length=2, mini_epochs=1, learning_rate=LR, lr_schedule="identity", e_clip=CLIP,
                        critic_coef=CRITIC, entropy_coef=0.0, clip_value=False, truncate_grads=False,
                        normalize_advantage=False, normalize_value=False, gamma=0.9, tau=0.95)
    model = Coin()
    learner = Learner(model, torch.optim.SGD(model.parameters(), lr=LR), train, lambda t: t, ppo=ppo,
                      num_minibatches=1, world=1, leader=True, device=torch.device("cpu"), seed=0, max_frames=4)
    n, total, done = learner.step([(len(ACTIONS), rollout())], done=True)
    assert (n, total, done) == (4, 4, True)
    g_theta, g_v = hand_gradient(ppo)
    assert torch.allclose(model.logits.detach(), torch.tensor([-LR * g for g in g_theta]), atol=1e-6)
    assert model.v.item() == pytest.approx(-LR * g_v, abs=1e-6)
    if ppo:  # rows 1 (A > 0, r = 2) is clipped: no gradient from it
        assert g_theta[0] == pytest.approx((-0.5 + 1.0 + 0.5 * 0.5 / 0.45 * 0.5) / 4)


def test_kl_estimate_is_reduced_with_the_gradients() -> None:
    """The sum over the group of ``0.5 (log mu - log pi)^2`` rides in the gradient reduction."""
    train = TrainConfig(horizon_length=2, mini_epochs=1, lr_schedule="identity", normalize_advantage=False)
    model = Coin()
    seen: list[torch.Tensor] = []
    learner = Learner(model, torch.optim.SGD(model.parameters(), lr=0.0), train, lambda t: seen.append(t.clone()),
                      ppo=True, num_minibatches=1, world=1, leader=True, device=torch.device("cpu"), seed=0,
                      max_frames=4)
    learner.step([(len(ACTIONS), rollout())], done=True)
    want = sum(0.5 * (math.log(0.5) - math.log(mu)) ** 2 for mu in MU)
    flat = seen[1]  # [0] is the (rows, done) head; [1] the first minibatch: gradients, rows, KL sum
    assert flat[-2].item() == 4 and flat[-1].item() == pytest.approx(want, rel=1e-5)
    assert learner.last_kl == pytest.approx(want / 4, rel=1e-5)
