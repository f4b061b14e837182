"""Keeping GMIs' models identical: initial weights, flat gradient reduction, normalisers over the group, KL mean."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed as dist
from rl_games.algos_torch.running_mean_std import RunningMeanStd, RunningMeanStdObs
from rl_games.common.schedulers import RLScheduler
from torch import nn

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.moments import group_moments
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


class GroupRunningMeanStd(RunningMeanStd):
    """rl-games' ``RunningMeanStd`` whose training update takes the moments of every GMI's rows.

    rl-games updates its normalisers where it meets a batch in training mode: the input normaliser on every
    minibatch forward, the value normaliser in ``prepare_dataset``. Each GMI holds a share of that batch; here the
    update reduces the share's moments over the group first (one small collective), so every GMI takes the step one
    process takes on the whole batch, and the statistics stay identical on every GMI without a merge afterwards.
    Same buffers as rl-games' module, so checkpoints load either way.
    """

    def __init__(self, like: nn.Module, all_reduce: Callable[[torch.Tensor], None]) -> None:
        super().__init__(like.insize, like.epsilon, like.per_channel, like.norm_only)
        # through the host: the lazy device refuses a copy from its tensors into a fresh module's
        self.load_state_dict({k: v.cpu() for k, v in like.state_dict().items()})
        self.to(like.running_mean.device)
        self.all_reduce = all_reduce

    def forward(self, input: torch.Tensor, denorm: bool = False,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        if not self.training:
            return super().forward(input, denorm, mask)
        if mask is not None:
            raise ValueError("GroupRunningMeanStd: rl-games 1.6.5 never masks a RunningMeanStd update")
        axis = tuple(self.axis)
        batch = group_moments(input, self.all_reduce, axis, shift=self.running_mean)
        if batch.count > 0:  # no GMI had rows: one process would not have stepped either
            dev, dt = self.running_mean.device, self.running_mean.dtype
            # rl-games counts rows (per_channel: the moments are over rows and pixels, the count is rows)
            rows = batch.count / math.prod(input.shape[i] for i in axis[1:])
            self.running_mean, self.running_var, self.count = self._update_mean_var_count_from_moments(
                self.running_mean, self.running_var, self.count, batch.mean.to(dev, dt), batch.var.to(dev, dt),
                rows)
        self.training = False  # normalise with the updated statistics, as rl-games does, without a second update
        try:
            return super().forward(input, denorm)
        finally:
            self.training = True


class GroupRunningMeanStdObs(RunningMeanStdObs):
    """rl-games' ``RunningMeanStdObs`` (dict observations) with a :class:`GroupRunningMeanStd` per key.

    Each key's step is one collective, so every GMI steps the keys in one order, the module's (the keys of the
    observation space), whatever order a GMI's observation dict has. Same buffers as rl-games' module.
    """

    def __init__(self, like: RunningMeanStdObs, all_reduce: Callable[[torch.Tensor], None]) -> None:
        nn.Module.__init__(self)
        self.running_mean_std = nn.ModuleDict({k: GroupRunningMeanStd(m, all_reduce)
                                               for k, m in like.running_mean_std.items()})

    def forward(self, input: dict[str, torch.Tensor], denorm: bool = False) -> dict[str, torch.Tensor]:
        if input.keys() != self.running_mean_std.keys():  # a GMI skipping a key would hang the others' collective
            raise ValueError(f"invalid observation keys {sorted(input)}; this GMI's normaliser steps every key of "
                             f"the observation space: {sorted(self.running_mean_std)}")
        out = {k: m(input[k], denorm) for k, m in self.running_mean_std.items()}
        return {k: out[k] for k in input}


def step_without_rows(m: nn.Module) -> None:
    """Take part in a group normaliser's step for which this GMI has no rows (it adds count 0).

    Every GMI must join each of the group's steps; one with nothing in a minibatch (the learner's trainers, whose
    shares of a minibatch vary) calls this where the others' forward steps the normaliser. Others: nothing.
    """
    if isinstance(m, GroupRunningMeanStdObs):  # each key's step, in the order its forward takes them
        for inner in m.running_mean_std.values():
            step_without_rows(inner)
        return
    if not (isinstance(m, GroupRunningMeanStd) and m.training):
        return
    shape = (0, *m.insize) if isinstance(m.insize, tuple | list) else (0, m.insize)  # the rows' shape: insize
    m(torch.zeros(shape, dtype=m.running_mean.dtype, device=m.running_mean.device))


def group_normalisers(model: nn.Module, all_reduce: Callable[[torch.Tensor], None]) -> list[str]:
    """Swap ``model``'s input and value normalisers for :class:`GroupRunningMeanStd`; the names swapped.

    ``model``: an rl-games model (``running_mean_std``, ``value_mean_std``) or a central value net's.
    """
    swapped = []
    for name in ("running_mean_std", "value_mean_std"):
        m = getattr(model, name, None)
        if m is None or isinstance(m, GroupRunningMeanStd | GroupRunningMeanStdObs):
            continue
        if isinstance(m, RunningMeanStdObs):
            setattr(model, name, GroupRunningMeanStdObs(m, all_reduce))
            swapped.append(name)
            continue
        if not all(hasattr(m, a) for a in ("running_mean", "running_var", "count")):
            raise ValueError(f"the {name} normaliser ({type(m).__name__}) cannot be reduced over GMIs; valid: "
                             "rl-games' RunningMeanStd or RunningMeanStdObs, or one GMI")
        setattr(model, name, GroupRunningMeanStd(m, all_reduce))
        swapped.append(name)
    return swapped


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
