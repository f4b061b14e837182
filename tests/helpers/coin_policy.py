"""A two-action policy with a constant critic (rl-games' call interface) and one rollout, for hand-worked updates."""

from __future__ import annotations

import torch
from torch import nn


class Coin(nn.Module):
    """Logits ``theta`` for every state and a scalar critic ``v``, both starting at 0 (so pi = 1/2 per action)."""

    def __init__(self) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(2))
        self.v = nn.Parameter(torch.zeros(1))

    def forward(self, d: dict) -> dict:
        dist = torch.distributions.Categorical(logits=self.logits.expand(len(d["obs"]), 2))
        return {"prev_neglogp": -dist.log_prob(d["prev_actions"]), "values": self.v.expand(len(d["obs"]), 1),
                "entropy": dist.entropy()}


# one row per environment (horizon 2: record 0 is trained, record 1 bootstraps with value 0, so A = reward)
ACTIONS = [0, 1, 0, 1]
MU = [0.5, 0.25, 0.25, 0.45]  # behaviour probabilities of the actions taken; the policy now gives 0.5 to each
REWARDS = [1.0, 2.0, -1.0, 0.5]


def rollout() -> dict[str, torch.Tensor]:
    n = len(ACTIONS)
    return {"obs": torch.zeros(2 * n, 1), "actions": torch.tensor(ACTIONS * 2),
            "rewards": torch.tensor(REWARDS + [0.0] * n), "values": torch.zeros(2 * n),
            "dones": torch.zeros(2 * n, dtype=torch.uint8), "neglogp": -torch.tensor(MU * 2).log()}
