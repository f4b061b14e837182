"""Trainer-GMI updates on received experience: PPO (TDG_EX) and advantage actor-critic (A3C-style).

Losses are rl-games' own (``common_losses.actor_loss`` with ``is_ppo`` on or off,
``critic_loss``) on rl-games' model, so the update matches the sync path's PPO step (minus its
adaptive learning-rate schedule: the rate is constant here). Every collective goes through the
Role's ``allreduce`` (the Plan's reduction over the trainer group) and is weighted by rows, so a
trainer with nothing to train in a round still takes part with weight 0 and every trainer applies
the identical averaged gradient (identical weights everywhere).

Replayed (off-policy) rollouts go through the same step: PPO's clipped ratio against the stored
behaviour ``neglogp`` already corrects for the older policy; A2C's policy gradient is weighted by
the truncated importance weight ``min(1, pi/mu)`` (as ACER's truncation), which bounds the variance
a ratio against a long-gone policy would otherwise bring.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from rl_games.common import common_losses
from torch import nn

from gmiexp.rl.sync import merge_running_stats, start_counts


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
    out = {f: batch[f][:k] for f in ("obs", "actions", "values") if f in batch}
    if "neglogp" in batch:
        out["neglogp"] = batch["neglogp"][:k]
    out["advantages"] = adv[:-1].reshape(-1)
    out["returns"] = (adv[:-1] + v[:-1]).reshape(-1)
    return out


def truncated_is_weight(behaviour_neglogp: torch.Tensor, neglogp: torch.Tensor, cap: float = 1.0) -> torch.Tensor:
    """``min(cap, pi(a|s) / mu(a|s))`` per row from negative log-probabilities; no gradient flows through it."""
    return torch.exp(behaviour_neglogp - neglogp.detach()).clamp(max=cap)


def bound_loss(mu: torch.Tensor, soft: float = 1.1) -> torch.Tensor:
    """rl-games' bounds loss on continuous action means."""
    high = torch.clamp_min(mu - soft, 0.0) ** 2
    low = torch.clamp_max(mu + soft, 0.0) ** 2
    return (low + high).sum(dim=-1)


class Update:
    """One collective update round over the trainer group."""

    def __init__(self, role: Any, ppo: bool, num_minibatches: int) -> None:
        self.role = role
        self.model: nn.Module = role.model
        tr = role.plan.train
        self.tr = tr
        self.ppo = ppo
        self.mini_epochs = tr.mini_epochs if ppo else 1
        self.num_minibatches = num_minibatches if ppo else 1
        self.opt = torch.optim.Adam(self.model.parameters(), lr=tr.learning_rate, eps=1e-8)
        self.world = len(role.plan.trainer_group)
        self.horizon = tr.horizon_length
        self.last_loss = 0.0
        self.train_s = 0.0
        self.comm_s = 0.0
        self._counts: dict[int, float] = {}
        self._off_policy = False
        self._gen = torch.Generator().manual_seed(role.plan.seed + role.gmi_id)
        self.epoch0 = self.frame0 = 0  # counters restored from a checkpoint
        self.start_digest = ""

    def _sum(self, t: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        self.role.allreduce(t, average=False)
        self.comm_s += time.perf_counter() - t0
        return t

    def sync_initial_weights(self) -> None:
        """Every trainer starts from the first trainer's weights (a sum where the others contribute 0)."""
        state = [t for t in self.model.state_dict().values() if torch.is_tensor(t) and t.is_floating_point()]
        flat = torch.cat([t.detach().double().reshape(-1).cpu() for t in state])
        if self.role.gmi_id != min(self.role.plan.trainer_group):
            flat.zero_()
        self._sum(flat)
        off = 0
        with torch.no_grad():
            for t in state:
                t.copy_(flat[off:off + t.numel()].view_as(t).to(t.dtype))
                off += t.numel()

    def _dataset(self, fresh: list[tuple[int, dict[str, torch.Tensor]]]) -> dict[str, torch.Tensor] | None:
        if not fresh:
            return None
        parts = [gae(b, self.horizon, n, self.tr.gamma, self.tr.tau) for n, b in fresh]
        d = {k: torch.cat([p[k] for p in parts]).to(self.role.device) for k in parts[0]}
        if self.tr.normalize_advantage and d["advantages"].numel() > 1:
            a = d["advantages"]
            d["advantages"] = (a - a.mean()) / (a.std() + 1e-8)
        vms = getattr(self.model, "value_mean_std", None)
        if self.tr.normalize_value and vms is not None:
            vms.train()
            d["values"] = vms(d["values"].reshape(-1, 1)).reshape(-1)
            d["returns"] = vms(d["returns"].reshape(-1, 1)).reshape(-1)
            vms.eval()
        return d

    def _loss(self, d: dict[str, torch.Tensor], idx: torch.Tensor) -> torch.Tensor:
        actions = d["actions"][idx]
        res = self.model({"is_train": True, "prev_actions": actions, "obs": d["obs"][idx]})
        neglogp = res["prev_neglogp"]
        old = d["neglogp"][idx] if "neglogp" in d else neglogp.detach()
        e_clip = self.tr.e_clip
        a_loss = common_losses.actor_loss(old, neglogp, d["advantages"][idx], self.ppo, e_clip)
        if self._off_policy and not self.ppo:
            a_loss = a_loss * truncated_is_weight(old, neglogp)
        values = res["values"].reshape(-1)
        c_loss = common_losses.critic_loss(self.model, d["values"][idx], values, e_clip, d["returns"][idx],
                                           self.ppo and self.tr.clip_value)
        # per-row terms first, one mean last: the same loss, and no Python scalar meets a 0-dim tensor
        # (which the lazy stand-in device mis-types, see gmiexp.rl.lazy)
        rows = a_loss + 0.5 * self.tr.critic_coef * c_loss - self.tr.entropy_coef * res["entropy"]
        if "mus" in res:
            rows = rows + self.tr.bounds_loss_coef * bound_loss(res["mus"])
        return rows.mean()

    def step(self, fresh: list[tuple[int, dict[str, torch.Tensor]]], done: bool,
             off_policy: bool = False) -> tuple[int, int, bool]:
        """Train on rollouts ``[(num_envs, batch)]``; returns (my rows, all trainers' rows, all done).

        ``off_policy``: replayed rollouts (A2C weights them by the truncated importance weight).
        Every trainer of the group must call it the same number of times with the same flag.
        """
        self._off_policy = off_policy
        t0 = time.perf_counter()
        comm0 = self.comm_s
        if not self._counts:  # the normaliser counts every trainer starts the first merge from
            self._counts = start_counts(self.model)
        self.model.train()
        d = self._dataset(fresh)
        n = 0 if d is None else int(d["advantages"].numel())
        head = self._sum(torch.tensor([float(n), float(done)], dtype=torch.float64))
        total, all_done = int(head[0].item()), int(head[1].item()) == self.world
        if total == 0:
            self.model.eval()
            self.train_s += time.perf_counter() - t0 - (self.comm_s - comm0)
            return 0, 0, all_done
        params = [p for p in self.model.parameters() if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        losses = []
        for _ in range(self.mini_epochs):
            chunks = torch.randperm(n, generator=self._gen).chunk(self.num_minibatches) if n else ()
            for i in range(self.num_minibatches):
                idx = chunks[i] if i < len(chunks) else torch.zeros(0, dtype=torch.long)
                self.opt.zero_grad(set_to_none=False)
                if idx.numel():
                    loss = self._loss(d, idx)
                    loss.backward()
                    losses.append(float(loss.item()))
                # the row count rides with the gradients, so it lives on their device
                flat = torch.cat([p.grad.reshape(-1) * idx.numel() for p in params]
                                 + [torch.tensor([float(idx.numel())], dtype=params[0].dtype, device=params[0].device)])
                self._sum(flat)
                rows = flat[-1].item()
                if rows == 0:
                    continue
                off = 0
                for p in params:
                    p.grad.copy_(flat[off:off + p.numel()].view_as(p) / rows)
                    off += p.numel()
                if self.tr.truncate_grads:
                    nn.utils.clip_grad_norm_(params, self.tr.grad_norm)
                self.opt.step()
        merge_running_stats(self.model, self._sum, self.world, self._counts)
        self.model.eval()
        self.last_loss = sum(losses) / len(losses) if losses else 0.0
        self.train_s += time.perf_counter() - t0 - (self.comm_s - comm0)
        return n, total, all_done


def make_update(role: Any, sync: bool) -> Update:
    """PPO for TDG_EX; ``async_train.algo`` (a2c by default) for decoupled async."""
    plan = role.plan
    ppo = sync or role.acfg.algo == "ppo"
    per_trainer = []
    for t in plan.trainer_group:
        agents = [a for a, tt in plan.channels if tt == t]
        envs = [plan.gmi(a).num_envs for a in agents]
        per_trainer.append((sum(envs) if sync else min(envs, default=1)) * (plan.train.horizon_length - 1))
    rows = max(1, min(per_trainer))
    return Update(role, ppo, max(1, rows // plan.train.minibatch_size))
