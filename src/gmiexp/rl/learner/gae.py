"""Generalised advantage estimation over one rollout, the one GAE of the experience layouts (fresh and replayed)."""

from __future__ import annotations

import torch


def gae(batch: dict[str, torch.Tensor], horizon: int, n: int, gamma: float, tau: float) -> dict[str, torch.Tensor]:
    """Advantages and returns of the first ``horizon - 1`` records of one rollout (the last one bootstraps)."""
    v = batch["values"].reshape(horizon, n).float()
    r = batch["rewards"].reshape(horizon, n).float()
    nd = 1.0 - batch["dones"].reshape(horizon, n).float()
    adv = torch.zeros(horizon, n)
    last = torch.zeros(n)
    for t in range(horizon - 2, -1, -1):
        delta = r[t] + gamma * v[t + 1] * nd[t] - v[t]
        last = delta + gamma * tau * nd[t] * last
        adv[t] = last
    k = (horizon - 1) * n
    out = {f: batch[f][:k] for f in ("obs", "actions", "values", "mus", "sigmas") if f in batch}
    if "neglogp" in batch:
        out["neglogp"] = batch["neglogp"][:k]
    out["advantages"] = adv[:-1].reshape(-1)
    out["returns"] = (adv[:-1] + v[:-1]).reshape(-1)
    return out
