"""The GMIs' group as rsl_rl's PPO needs it: weights broadcast, gradients reduced, normalisers and advantages exact.

rsl_rl's own multi-GPU path starts NCCL itself (one rank per GPU); here the Plan's reduction carries the
gradients (several GMIs per GPU) and gmiexp's gloo default group the rest, through the host where gloo needs it.
Moments of rows spread over the GMIs come from :mod:`gmiexp.comm.moments` (one reduced float64 buffer).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from rsl_rl.modules import EmpiricalDiscountedVariationNormalization, EmpiricalNormalization
from torch import nn

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.moments import AllReduce, Moments, group_moments, group_moments_many
from gmiexp.comm.reduction import Reduction


def standardise(a: torch.Tensor, m: Moments) -> torch.Tensor:
    """``a`` less the mean, over the unbiased std plus 1e-8, of the rows ``m`` describes: rsl_rl's advantages."""
    n = m.count
    mean = float(m.mean.reshape(-1)[0])
    std = (float(m.var.reshape(-1)[0]) * n / max(1.0, n - 1)) ** 0.5
    return (a - mean) / (std + 1e-8)


class StepMoments:
    """The normaliser updates of one step, reduced over the group together (:func:`group_moments_many`).

    rsl_rl updates the actor's, critic's and RND's state normalisers one after the other at the start of
    ``process_env_step`` and reads none of them before its next forward pass; each :class:`GroupNormalization`
    hands its input here, and the first forward pass of any of them (or ``GMIPPO`` at the end of the step) takes one
    collective for all. Every GMI runs the same code, so every GMI flushes the same updates at the same place.
    """

    def __init__(self, all_reduce: AllReduce) -> None:
        self.all_reduce = all_reduce
        self.pending: list[tuple[GroupNormalization, torch.Tensor]] = []

    def add(self, norm: GroupNormalization, x: torch.Tensor) -> None:
        """``norm``'s update on ``x``, to be taken at the next :meth:`flush` (now, if ``norm`` already waits)."""
        if any(n is norm for n, _ in self.pending):
            self.flush()
        self.pending.append((norm, x))

    def flush(self) -> None:
        """Take every waiting update on the moments of every GMI's rows (one collective; none if nothing waits)."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        shifts = [n._mean.reshape(x.shape[1:]) for n, x in pending]
        batches = group_moments_many([x for _, x in pending], self.all_reduce, shifts)  # type: ignore[arg-type]
        for (norm, _), batch in zip(pending, batches, strict=True):
            norm.step(batch)


@dataclass
class GroupSync:
    """One GMI's view of the trainer group (``rank`` of ``world``) and the two transports it reduces with."""

    mgr: GMIManager
    reduction: Reduction
    rank: int
    world: int
    #: the run's seed (the same on every GMI): the minibatch permutation is drawn from it
    seed: int = 0
    #: this GMI's share of the minibatch being trained, ``rows * world / minibatch rows`` (set by the storage):
    #: the factor its mean loss's gradient and its KL take so that the group's average is one process's mean
    weight: float = 1.0
    #: the step's normaliser updates, reduced together (see :class:`StepMoments`)
    moments: StepMoments = field(init=False)

    def __post_init__(self) -> None:
        self.moments = StepMoments(self.sum_)

    def __deepcopy__(self, memo: dict[int, Any]) -> GroupSync:
        """The same handle: the live group cannot be copied (rsl_rl 5.5 deep-copies the algorithm's config)."""
        return self

    def sum_(self, t: torch.Tensor) -> None:
        """Sum a float64 host tensor over the group in place (every GMI ends with the same bits)."""
        self.mgr.all_reduce_(t)

    def gather(self, obj: Any) -> list[Any]:
        """Every group rank's ``obj`` in rank order (pickled over gloo: a checkpoint's records, a few KiB each)."""
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj, group=self.mgr.group(list(self.mgr.plan.trainer_group)))
        return out

    def shares(self, num_envs: int) -> list[int]:
        """Every group rank's environments (a collective: every GMI asks once, with its own ``num_envs``)."""
        counts = torch.zeros(self.world, dtype=torch.float64)
        counts[self.rank] = num_envs
        self.sum_(counts)
        return [int(c) for c in counts.tolist()]

    def broadcast(self, models: Iterable[nn.Module]) -> None:
        """Group rank 0's parameters and buffers (normalisers included) into every GMI's ``models``."""
        with torch.no_grad():
            for model in models:
                for t in [*model.parameters(), *model.buffers()]:
                    self.mgr.broadcast_(t, self.mgr.plan.trainer_group[0])

    def reduce_gradients(self, params: Iterable[nn.Parameter]) -> None:
        """Average the gradients of ``params`` over the group, each GMI's taken ``weight`` times (one flat reduction).

        With every GMI's gradient the mean over its rows of a minibatch, the weighted average is the mean over the
        minibatch's rows, the gradient one process takes.
        """
        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        if self.weight == 0:
            flat.zero_()  # a stand-in row: its loss does not count
        elif self.weight != 1:
            flat.mul_(self.weight)
        self.reduction.allreduce_(flat, average=True)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()

    def normalise(self, a: torch.Tensor) -> torch.Tensor:
        """``a`` normalised as rsl_rl does over one process's whole batch: mean and unbiased std of all GMIs' rows."""
        return standardise(a, group_moments(a.reshape(-1, 1), self.sum_))


class GroupNormalization(EmpiricalNormalization):
    """rsl_rl's ``EmpiricalNormalization`` whose update takes the moments of every GMI's rows.

    rsl_rl updates its normalisers on each step's batch (``process_env_step``: the actor's and critic's observation
    normalisers, RND's state normaliser; RND's reward normaliser in its intrinsic reward). Each GMI holds a share
    of that batch; here the share's moments are reduced over the group first (:class:`StepMoments`: one small
    float64 collective for the updates of a step, taken before the first forward pass that needs them; with
    ``immediate`` at once) and rsl_rl's update step is taken with them, so every GMI moves its statistics as one
    process does on the whole batch and they stay identical on every GMI. Same buffers as rsl_rl's module, so
    checkpoints load either way. ``update`` is replaced, not extended: rsl_rl releases whose own ``update``
    all-reduces over ``torch.distributed`` (5.5) are not reduced twice.
    """

    def __init__(self, like: EmpiricalNormalization, moments: StepMoments, immediate: bool = False) -> None:
        super().__init__(tuple(like._mean.shape[1:]), eps=like.eps, until=like.until)
        # through the host: the lazy device's tensors cannot be copied into a host module's (functionalisation)
        self.load_state_dict({k: v.detach().cpu() for k, v in like.state_dict().items()})
        self.to(like._mean.device)
        self.train(like.training)
        self.moments, self.immediate = moments, immediate

    @torch.jit.unused
    def update(self, x: torch.Tensor) -> None:
        """rsl_rl's update on the moments of every GMI's ``x`` (the statistics of one process's whole batch)."""
        if not self.training:
            return
        if self.until is not None and self.count >= self.until:
            return
        self.moments.add(self, x)
        if self.immediate:
            self.moments.flush()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.moments.flush()
        return super().forward(x)

    def step(self, batch: Moments) -> None:
        """rsl_rl's step (``EmpiricalNormalization.update``) with the group's count, mean and variance."""
        mean_x = batch.mean.to(self._mean.device, self._mean.dtype).reshape(self._mean.shape)
        var_x = batch.var.to(self._var.device, self._var.dtype).reshape(self._var.shape)
        count_x = int(batch.count)
        self.count += count_x
        rate = count_x / self.count
        delta_mean = mean_x - self._mean
        self._mean += rate * delta_mean
        self._var += rate * (var_x - self._var + delta_mean * (mean_x - self._mean))
        self._std = torch.sqrt(self._var)

    def __deepcopy__(self, memo: dict[int, Any]) -> EmpiricalNormalization:
        """rsl_rl's own module with these statistics (what rsl_rl's JIT and ONNX exports copy: they reduce nothing)."""
        plain = EmpiricalNormalization(tuple(self._mean.shape[1:]), eps=self.eps, until=self.until)
        plain.load_state_dict(copy.deepcopy(self.state_dict(), memo))
        return plain.to(self._mean.device).train(self.training)


def group_normalisers(models: Iterable[nn.Module], moments: StepMoments) -> list[str]:
    """Swap every ``EmpiricalNormalization`` in ``models`` for a :class:`GroupNormalization`; the names swapped.

    RND's reward normaliser updates at once (rsl_rl reads its ``_std`` right after the update).
    """
    swapped = []
    for i, model in enumerate(models):
        for name, m in list(model.named_modules()):
            if not isinstance(m, EmpiricalNormalization) or isinstance(m, GroupNormalization) or not name:
                continue
            parent_name, _, leaf = name.rpartition(".")
            parent = model.get_submodule(parent_name)
            immediate = isinstance(parent, EmpiricalDiscountedVariationNormalization)
            setattr(parent, leaf, GroupNormalization(m, moments, immediate))
            swapped.append(f"{i}.{name}")
    return swapped
