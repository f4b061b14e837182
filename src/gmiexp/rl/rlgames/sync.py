"""Keeping GMIs' models identical: initial weights, flat gradient reduction, running-statistics merge, KL mean."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed as dist
from rl_games.common.schedulers import RLScheduler
from torch import nn

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.reduction import Reduction
from gmiexp.device import host_staging


def broadcast_module(model: nn.Module, mgr: GMIManager, src: int = 0) -> None:
    """GMI ``src``'s parameters and buffers (normalisers included) into ``model`` on every GMI, in place.

    rl-games pickles its state dict with ``broadcast_object_list``; tensor by tensor through the
    manager works on any device (lazy tensors cannot be pickled, and gloo needs them on the host).
    """
    with torch.no_grad():
        for t in [*model.parameters(), *model.buffers()]:
            mgr.broadcast_(t, src)


class SyncedScheduler(RLScheduler):
    """rl-games' learning-rate scheduler fed the KL divergence averaged over every GMI.

    rl-games all-reduces the KL itself before its scheduler reads it (under ``multi_gpu``); here the
    average goes through the manager, so every GMI's adaptive schedule takes the same step.
    """

    def __init__(self, inner: RLScheduler, mgr: GMIManager) -> None:
        super().__init__()
        self.inner = inner
        self.mgr = mgr

    @property
    def kl_threshold(self) -> float:  # rl-games' population-based training sets it on the scheduler
        return self.inner.kl_threshold

    @kl_threshold.setter
    def kl_threshold(self, value: float) -> None:
        self.inner.kl_threshold = value

    def update(self, current_lr: float, entropy_coef: float, epoch: int, frames: int, kl_dist: Any = 0.0,
               **kwargs: Any) -> Any:
        kl = self.mgr.mean_float(float(kl_dist))
        return self.inner.update(current_lr, entropy_coef, epoch, frames, kl, **kwargs)


def reduce_gradients(params: Iterable[nn.Parameter], reduction: Reduction) -> None:
    """Average the gradients of ``params`` across the trainer group in one flat reduction."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    numel = sum(g.numel() for g in grads)
    buffer = getattr(reduction, "buffer", None)  # MPR: flatten straight into this GMI's shared slot
    if buffer is not None and grads[0].device.type == "cpu" and grads[0].dtype == torch.float32:
        flat = buffer(numel)
        torch.cat([g.reshape(-1) for g in grads], out=flat)
    else:
        flat = torch.cat([g.reshape(-1) for g in grads])
    reduction.allreduce_(flat, average=True)
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset:offset + n].view_as(g))
        offset += n


def running_stats_modules(model: nn.Module) -> list[nn.Module]:
    """rl-games' RunningMeanStd modules (observation and value normalisers)."""
    return [m for m in model.modules()
            if all(hasattr(m, a) for a in ("running_mean", "running_var", "count"))]


def start_counts(model: nn.Module) -> dict[int, float]:
    """Every normaliser's count now: record it before the first epoch (the common start of the first merge)."""
    return {idx: float(m.count.item()) for idx, m in enumerate(running_stats_modules(model))}


def merge_running_stats(model: nn.Module, all_reduce: Callable[[torch.Tensor], None],
                        world: int, last_count: dict[int, float]) -> None:
    """Merge every normaliser's mean/var/count across GMIs (Chan et al.'s parallel formula).

    Every GMI starts an epoch from the same statistics (count ``c0 = last_count[idx]``, from
    :func:`start_counts` before the first epoch, from this merge afterwards) and adds its own
    samples; the merged count is ``c0 + sum(c_i - c0)``. The collective is passed in (rl_games'
    ``merge_rank_stats`` style), so any transport works, and the all-reduce makes the result
    bit-identical on every GMI.
    """
    for idx, m in enumerate(running_stats_modules(model)):
        mean, var, count = m.running_mean, m.running_var, m.count
        c = count.to(torch.float64)
        packed = torch.cat([c.reshape(1), (c * mean.double()).reshape(-1),
                            (c * (var.double() + mean.double() ** 2)).reshape(-1)])
        all_reduce(packed)
        total = packed[0]
        n = mean.numel()
        g_mean = packed[1:1 + n] / total
        g_var = (packed[1 + n:] / total - g_mean ** 2).clamp_min(0.0)
        if idx not in last_count:
            raise ValueError("merge_running_stats: no start count recorded (call start_counts before the epoch)")
        c0 = last_count[idx]
        new_count = float(total.item()) - (world - 1) * c0
        mean.copy_(g_mean.view_as(mean).to(mean.dtype))
        var.copy_(g_var.view_as(var).to(var.dtype))
        count.fill_(new_count)
        last_count[idx] = new_count


def normalised(a: torch.Tensor, n: float, total: float, squares: float) -> torch.Tensor:
    """``a`` normalised with the mean and (unbiased) std of rows whose count, sum and sum of squares are given."""
    mean = total / n
    std = max(0.0, (squares - n * mean * mean) / max(1.0, n - 1)) ** 0.5
    return (a - mean) / (std + 1e-8)


def normalise_over_group(a: torch.Tensor, all_reduce: Callable[[torch.Tensor], None]) -> torch.Tensor:
    """Advantages normalised over every GMI's rows, as one GMI would over the whole batch (one reduced sum)."""
    d = a.detach().double().cpu()
    moments = torch.tensor([float(d.numel()), float(d.sum()), float((d * d).sum())], dtype=torch.float64)
    all_reduce(moments)
    return normalised(a, *moments.tolist())


def gloo_sum(group: object | None = None) -> Callable[[torch.Tensor], None]:
    """Sum over ``group`` on the gloo process group, staging tensors gloo cannot reduce through the host."""

    def _sum(t: torch.Tensor) -> None:
        if host_staging(t.device):
            host = t.cpu()
            dist.all_reduce(host, op=dist.ReduceOp.SUM, group=group)
            t.copy_(host)
        else:
            dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)

    return _sum
