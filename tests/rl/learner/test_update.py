"""One PPO / A2C step of the learner against a hand computation; its rl-games penalty, clamp, KL and schedule."""

from __future__ import annotations

import math

import pytest
import torch
from coin_policy import ACTIONS, MU, REWARDS, Coin, rollout
from rl_games.algos_torch import torch_ext
from rl_games.common import common_losses
from torch import nn

from gmiexp.config import TrainConfig
from gmiexp.rl.learner.losses import row_losses
from gmiexp.rl.learner.sequences import model_input
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
    train = TrainConfig(horizon_length=1, mini_epochs=1, learning_rate=LR, lr_schedule="identity", e_clip=CLIP,
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
    train = TrainConfig(horizon_length=1, mini_epochs=1, lr_schedule="identity", normalize_advantage=False)
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


class Gauss(nn.Module):
    """A 2-d Gaussian policy with state-independent means and deviations and a zero critic (rl-games' interface)."""

    def __init__(self) -> None:
        super().__init__()
        self.mu = nn.Parameter(torch.tensor([1.5, -0.4]))
        self.logstd = nn.Parameter(torch.tensor([-0.2, 0.1]))

    def forward(self, d: dict) -> dict:
        n = len(d["obs"])
        mus, sigmas = self.mu.expand(n, 2), self.logstd.exp().expand(n, 2)
        dist = torch.distributions.Normal(mus, sigmas)
        return {"prev_neglogp": -dist.log_prob(d["prev_actions"]).sum(-1), "values": torch.zeros(n, 1),
                "entropy": dist.entropy().sum(-1), "mus": mus, "sigmas": sigmas}


def gauss_batch(with_gaussian: bool) -> dict[str, torch.Tensor]:
    n = 3
    d = {"obs": torch.zeros(n, 1), "actions": torch.tensor([[0.1, 0.2], [2.0, -1.0], [-0.5, 0.0]]),
         "values": torch.zeros(n), "returns": torch.zeros(n), "advantages": torch.tensor([1.0, 2.0, 0.5]),
         "neglogp": torch.tensor([1.0, 3.5, 4.88])}  # ratios about 0.1, 4.2 and 1.1
    if with_gaussian:
        d["mus"], d["sigmas"] = torch.tensor([[1.4, -0.3]] * n), torch.tensor([[0.9, 1.2]] * n)
    return d


def test_the_mean_penalty_and_the_ratio_clamp_are_rl_games_choice() -> None:
    """``bound_loss_type`` picks rl-games' bound or regularisation penalty; ``use_smooth_clamp`` its smoothed loss."""
    d, idx = gauss_batch(False), torch.arange(3)
    base = TrainConfig(entropy_coef=0.0, critic_coef=0.0, bounds_loss_coef=0.5)
    rows = {t: row_losses(Gauss(), d, idx, TrainConfig(**{**base.__dict__, "bound_loss_type": t}), True, False)[0]
            for t in ("bound", "regularisation")}
    free = row_losses(Gauss(), d, idx, TrainConfig(**{**base.__dict__, "bounds_loss_coef": 0.0}), True, False)[0]
    mu = torch.tensor([1.5, -0.4])
    assert torch.allclose(rows["regularisation"] - free, torch.full((3,), 0.5 * float((mu * mu).sum())))
    assert torch.allclose(rows["bound"] - free, torch.full((3,), 0.5 * (1.5 - 1.1) ** 2))
    smooth = row_losses(Gauss(), d, idx, TrainConfig(**{**base.__dict__, "bounds_loss_coef": 0.0,
                                                       "use_smooth_clamp": True}), True, False)[0]
    new = Gauss()(model_input(d, idx, 1))["prev_neglogp"]
    want = common_losses.smoothed_actor_loss(d["neglogp"], new, d["advantages"], True, base.e_clip)
    assert torch.allclose(smooth, want) and not torch.allclose(smooth, free)


def test_continuous_kl_is_rl_games_closed_form_on_the_behaviour_gaussian() -> None:
    idx = torch.arange(3)
    kl = row_losses(Gauss(), gauss_batch(True), idx, TrainConfig(), True, False)[1]
    want = torch_ext.policy_kl(torch.tensor([[1.5, -0.4]] * 3), torch.tensor([-0.2, 0.1]).exp().expand(3, 2),
                               gauss_batch(True)["mus"], gauss_batch(True)["sigmas"], False)
    assert torch.allclose(kl, want)
    estimate = row_losses(Gauss(), gauss_batch(False), idx, TrainConfig(), True, False)[1]  # no Gaussian carried
    assert not torch.allclose(estimate, want)


@pytest.mark.parametrize(("schedule_type", "moves"), [("legacy", 2), ("standard", 1)])
def test_the_adaptive_rate_moves_as_rl_games_schedule_type_says(schedule_type: str, moves: int) -> None:
    """rl-games' default ``legacy`` moves the rate after every minibatch, ``standard`` once per mini-epoch."""
    train = TrainConfig(horizon_length=1, mini_epochs=1, learning_rate=1e-4, lr_schedule="adaptive",
                        kl_threshold=10.0, rlgames_config={"schedule_type": schedule_type})
    model = Coin()
    learner = Learner(model, torch.optim.SGD(model.parameters(), lr=1e-4), train, lambda t: t, ppo=True,
                      num_minibatches=2, world=1, leader=True, device=torch.device("cpu"), seed=0, max_frames=4)
    learner.step([(len(ACTIONS), rollout())], done=True)
    assert learner.lr == pytest.approx(1e-4 * 1.5 ** moves)  # the KL stays far below the threshold: x1.5 a move
