"""Per-row losses of the experience trainers, from rl-games' own loss functions on rl-games' model.

``actor_loss`` with ``is_ppo`` on (clipped ratio) or off (A2C's ``neglogp x advantage``; its
``smoothed_actor_loss`` with ``train.use_smooth_clamp``), ``critic_loss``, the penalty on continuous means
of ``train.bound_loss_type``. Replayed (off-policy) rows: PPO's ratio
against the stored behaviour ``neglogp`` already corrects for the older policy; A2C weights its
policy gradient by the truncated importance weight ``min(1, pi/mu)`` (ACER's truncation).
"""

from __future__ import annotations

import torch
from rl_games.algos_torch import torch_ext
from rl_games.common import common_losses
from torch import nn

from gmiexp.config import TrainConfig
from gmiexp.rl.learner.sequences import model_input


def truncated_is_weight(behaviour_neglogp: torch.Tensor, neglogp: torch.Tensor, cap: float = 1.0) -> torch.Tensor:
    """``min(cap, pi(a|s) / mu(a|s))`` per row from negative log-probabilities; no gradient flows through it."""
    return torch.exp(behaviour_neglogp - neglogp.detach()).clamp(max=cap)


def bound_loss(mu: torch.Tensor, soft: float = 1.1) -> torch.Tensor:
    """rl-games' bounds loss on continuous action means (``bound_loss_type: bound``)."""
    high = torch.clamp_min(mu - soft, 0.0) ** 2
    low = torch.clamp_max(mu + soft, 0.0) ** 2
    return (low + high).sum(dim=-1)


def reg_loss(mu: torch.Tensor) -> torch.Tensor:
    """rl-games' ``bound_loss_type: regularisation``: the squared action means."""
    return (mu * mu).sum(dim=-1)


#: rl-games' penalties on continuous action means, by ``train.bound_loss_type``.
MEAN_PENALTIES = {"bound": bound_loss, "regularisation": reg_loss}


def kl_estimate(old_neglogp: torch.Tensor, neglogp: torch.Tensor) -> torch.Tensor:
    """``0.5 (log mu - log pi)^2`` per row: rl-games' KL estimate for discrete actions.

    Continuous actions use rl-games' closed form (``torch_ext.policy_kl``) on the ``mus`` and ``sigmas``
    the channels carry (:func:`row_losses`).
    """
    return 0.5 * (old_neglogp - neglogp.detach()) ** 2


def row_losses(model: nn.Module, d: dict[str, torch.Tensor], idx: torch.Tensor, train: TrainConfig, ppo: bool,
               off_policy: bool, seq_length: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss per row, KL estimate per row, the current policy's ``neglogp``) of the rows ``idx`` of ``d``.

    A recurrent policy's ``idx`` holds whole sequences of ``seq_length`` rows (:mod:`.sequences`).
    """
    res = model(model_input(d, idx, seq_length))
    neglogp = res["prev_neglogp"]
    old = d["neglogp"][idx] if "neglogp" in d else neglogp.detach()
    actor = common_losses.smoothed_actor_loss if train.use_smooth_clamp else common_losses.actor_loss  # as rl-games
    a_loss = actor(old, neglogp, d["advantages"][idx], ppo, train.e_clip)
    if off_policy and not ppo:
        a_loss = a_loss * truncated_is_weight(old, neglogp)
    values = res["values"].reshape(-1)
    c_loss = common_losses.critic_loss(model, d["values"][idx], values, train.e_clip, d["returns"][idx],
                                       ppo and train.clip_value)
    # per-row terms first, one mean last (by the caller): the same loss, and no Python scalar meets a
    # 0-dim tensor (which the lazy stand-in device mis-types, see gmiexp.rl.rlgames.lazy)
    rows = a_loss + 0.5 * train.critic_coef * c_loss - train.entropy_coef * res["entropy"]
    if "mus" in res:
        rows = rows + train.bounds_loss_coef * MEAN_PENALTIES[train.bound_loss_type](res["mus"])
    if "mus" in res and "mus" in d:  # rl-games' closed form against the behaviour's Gaussian (the channels carry it)
        kl = torch_ext.policy_kl(res["mus"].detach(), res["sigmas"].detach(), d["mus"][idx], d["sigmas"][idx], False)
    else:
        kl = kl_estimate(old, neglogp)
    return rows, kl, neglogp.detach()
