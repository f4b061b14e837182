"""Moments of rows spread over GMIs, as one process holding every row would compute them.

The one home of the normaliser arithmetic both trainers share (rl-games' ``RunningMeanStd``, rsl_rl's
``EmpiricalNormalization``):

* :func:`group_moments`: count, mean and population variance of every GMI's rows, from float64 sums reduced in
  one collective (shifted by a value every GMI holds, so that large means do not cancel the variance away). A
  normaliser that updates on a batch calls it where one process would update on the whole batch.
* :func:`merge_from_start`: Chan et al.'s parallel moments for statistics that moved on each GMI's own rows
  since a common start ``(c0, m0, v0)``: the start is counted once, each GMI's rows once.

``all_reduce`` sums a float64 host tensor over the group in place (every GMI ends with the same bits), so the
results are bit-identical on every GMI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

AllReduce = Callable[[torch.Tensor], None]


@dataclass(frozen=True)
class Moments:
    """``count`` rows with this ``mean`` and population ``var`` (float64, on the host, per feature)."""

    count: float
    mean: torch.Tensor
    var: torch.Tensor


def group_moments(x: torch.Tensor, all_reduce: AllReduce, axis: tuple[int, ...] = (0,),
                  shift: torch.Tensor | None = None) -> Moments:
    """Count, mean and population variance over ``axis`` of the rows of every GMI (one reduced buffer).

    ``shift`` (same value on every GMI, e.g. the running mean) is subtracted before the sums are taken.
    """
    d = x.detach().to(device="cpu", dtype=torch.float64)
    keep = [i for i in range(d.dim()) if i not in axis]
    c = shift.detach().to(device="cpu", dtype=torch.float64) if shift is not None else None
    if c is not None:
        d = d - c.reshape([d.shape[i] if i in keep else 1 for i in range(d.dim())])
    count = 1
    for i in axis:
        count *= d.shape[i]
    s1, s2 = d.sum(dim=axis), (d * d).sum(dim=axis)
    packed = torch.cat([torch.tensor([float(count)], dtype=torch.float64), s1.reshape(-1), s2.reshape(-1)])
    all_reduce(packed)
    n, k = float(packed[0]), s1.numel()
    mean = packed[1:1 + k].reshape(s1.shape) / n
    var = (packed[1 + k:].reshape(s1.shape) / n - mean * mean).clamp_min(0.0)
    return Moments(n, mean + c if c is not None else mean, var)


def merge_from_start(start: Moments, local: Moments, all_reduce: AllReduce) -> Moments:
    """The moments of the common start and every GMI's rows since, from each GMI's own running moments.

    Each GMI began at ``start`` and its running statistics ``local`` now also hold its own rows; what each added
    (count, sum and sum of squares about ``start.mean``) is summed over the group, and the start counted once.
    """
    c0, m0, v0 = start.count, start.mean.double().reshape(-1), start.var.double().reshape(-1)
    c, m, v = local.count, local.mean.double().reshape(-1), local.var.double().reshape(-1)
    dm = m - m0
    added = torch.cat([torch.tensor([c - c0], dtype=torch.float64), c * dm, c * (v + dm * dm) - c0 * v0])
    all_reduce(added)
    n, k = float(added[0]), m0.numel()
    total = c0 + n
    if n <= 0:
        return start
    mean_dev = added[1:1 + k] / total
    var = ((c0 * v0 + added[1 + k:]) / total - mean_dev * mean_dev).clamp_min(0.0)
    shape = start.mean.shape
    return Moments(total, (m0 + mean_dev).reshape(shape), var.reshape(shape))
