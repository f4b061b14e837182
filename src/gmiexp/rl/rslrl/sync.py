"""The GMIs' group as rsl_rl's PPO needs it: weights broadcast, gradients reduced, normalisers and advantages merged.

rsl_rl's own multi-GPU path starts NCCL itself (one rank per GPU); here the Plan's reduction carries the
gradients (several GMIs per GPU) and gmiexp's gloo default group the rest, through the host where gloo needs it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
from torch import nn

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.reduction import Reduction


def normalisers(models: Iterable[nn.Module]) -> list[nn.Module]:
    """rsl_rl's EmpiricalNormalization modules in ``models`` (observation normalisers, RND's reward one)."""
    return [m for model in models for m in model.modules()
            if all(hasattr(m, a) for a in ("_mean", "_var", "_std", "count"))]


@dataclass
class GroupSync:
    """One GMI's view of the trainer group (``rank`` of ``world``) and the two transports it reduces with."""

    mgr: GMIManager
    reduction: Reduction
    rank: int
    world: int
    #: every normaliser's (count, mean, var) when the group last agreed on it: the common start of the next merge
    start: list[tuple[float, torch.Tensor, torch.Tensor]] = field(default_factory=list)

    def broadcast(self, models: Iterable[nn.Module]) -> None:
        """Group rank 0's parameters and buffers (normalisers included) into every GMI's ``models``."""
        with torch.no_grad():
            for model in models:
                for t in [*model.parameters(), *model.buffers()]:
                    self.mgr.broadcast_(t, self.mgr.plan.trainer_group[0])

    def reduce_gradients(self, params: Iterable[nn.Parameter]) -> None:
        """Average the gradients of ``params`` over the group in one flat reduction with the Plan's strategy."""
        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        self.reduction.allreduce_(flat, average=True)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()

    def snapshot(self, mods: list[nn.Module]) -> None:
        """Record the normalisers' agreed state (after the broadcast, after each merge)."""
        self.start = [(float(m.count.item()), m._mean.detach().double().cpu().clone(),
                       m._var.detach().double().cpu().clone()) for m in mods]

    def merge_normalisers(self, mods: list[nn.Module]) -> None:
        """Every GMI's normalisers become those of all GMIs' samples since the last agreement (Chan's formula).

        Each GMI started from the same (c0, m0, v0) and added its own samples; the sums of what each added
        (count, sum, sum of squares) are all-reduced in float64, so the result is bit-identical on every GMI.
        """
        if len(self.start) != len(mods):
            self.snapshot(mods)
            return
        for m, (c0, m0, v0) in zip(mods, self.start, strict=True):
            c = float(m.count.item())
            mean, var = m._mean.detach().double().cpu(), m._var.detach().double().cpu()
            added = torch.cat([torch.tensor([c - c0], dtype=torch.float64), (c * mean - c0 * m0).reshape(-1),
                               (c * (var + mean ** 2) - c0 * (v0 + m0 ** 2)).reshape(-1)])
            self.mgr.all_reduce_(added)
            n = added[0].item()
            if n <= 0:
                continue
            d = mean.numel()
            total = c0 + n
            g_mean = (c0 * m0.reshape(-1) + added[1:1 + d]) / total
            g_var = ((c0 * (v0 + m0 ** 2).reshape(-1) + added[1 + d:]) / total - g_mean ** 2).clamp_min(0.0)
            with torch.no_grad():
                m._mean.copy_(g_mean.view_as(m._mean).to(m._mean.dtype))
                m._var.copy_(g_var.view_as(m._var).to(m._var.dtype))
                m._std.copy_(torch.sqrt(m._var))
                m.count.fill_(int(round(total)))
        self.snapshot(mods)

    def normalise(self, a: torch.Tensor) -> torch.Tensor:
        """``a`` normalised as rsl_rl does over one process's whole batch: mean and unbiased std of all GMIs' rows."""
        d = a.detach().double().cpu()
        moments = torch.tensor([float(d.numel()), float(d.sum()), float((d * d).sum())], dtype=torch.float64)
        self.mgr.all_reduce_(moments)
        n, s, q = moments.tolist()
        mean = s / n
        std = max(0.0, (q - n * mean * mean) / max(1.0, n - 1)) ** 0.5
        return (a - mean) / (std + 1e-8)
