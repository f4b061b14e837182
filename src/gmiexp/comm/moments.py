"""Moments of rows spread over GMIs, as one process holding every row would compute them.

The one home of the normaliser arithmetic both trainers share (rl-games' ``RunningMeanStd``, rsl_rl's
``EmpiricalNormalization``):

* :func:`group_moments`: count, mean and population variance of every GMI's rows, from float64 sums reduced in
  one collective (shifted by a value every GMI holds, so that large means do not cancel the variance away). A
  normaliser that updates on a batch calls it where one process would update on the whole batch;
  :func:`group_moments_many` does it for several batches in one collective.

No GMI's normaliser moves on its own rows alone, so nothing is merged afterwards (a merge of statistics that moved
apart from a common start would have to count that start once: the one this replaced counted it G times).

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
    return group_moments_many([x], all_reduce, [shift], axis)[0]


def group_moments_many(xs: list[torch.Tensor], all_reduce: AllReduce, shifts: list[torch.Tensor | None],
                       axis: tuple[int, ...] = (0,)) -> list[Moments]:
    """:func:`group_moments` of several batches (each with its own ``shift``) in one reduced buffer.

    For normalisers that update at the same place on different inputs (rsl_rl's actor's, critic's and RND's on a
    step's observations): one collective instead of one each.
    """
    parts = [_sums(x, axis, shift) for x, shift in zip(xs, shifts, strict=True)]
    packed = torch.cat([p for p, _, _ in parts])
    all_reduce(packed)
    out, offset = [], 0
    for p, shape, c in parts:
        out.append(_moments(packed[offset:offset + p.numel()], shape, c))
        offset += p.numel()
    return out


def _sums(x: torch.Tensor, axis: tuple[int, ...],
          shift: torch.Tensor | None) -> tuple[torch.Tensor, torch.Size, torch.Tensor | None]:
    """The count, sum and sum of squares of ``x`` about ``shift`` (float64, packed), their shape, the shift."""
    d = x.detach().to(device="cpu", dtype=torch.float64)
    keep = [i for i in range(d.dim()) if i not in axis]
    c = shift.detach().to(device="cpu", dtype=torch.float64) if shift is not None else None
    if c is not None:
        d = d - c.reshape([d.shape[i] if i in keep else 1 for i in range(d.dim())])
    count = 1
    for i in axis:
        count *= d.shape[i]
    s1, s2 = d.sum(dim=axis), (d * d).sum(dim=axis)
    return torch.cat([torch.tensor([float(count)], dtype=torch.float64), s1.reshape(-1), s2.reshape(-1)]), s1.shape, c


def _moments(packed: torch.Tensor, shape: torch.Size, c: torch.Tensor | None) -> Moments:
    """The moments from the group's packed sums (see :func:`_sums`)."""
    n, k = float(packed[0]), (packed.numel() - 1) // 2
    mean = packed[1:1 + k].reshape(shape) / n
    var = (packed[1 + k:].reshape(shape) / n - mean * mean).clamp_min(0.0)
    return Moments(n, mean + c if c is not None else mean, var)
