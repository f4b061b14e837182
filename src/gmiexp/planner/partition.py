"""A partition and the global batch it must keep: how one job is cut into GMIs without changing its learning.

A *partition* is the cut: GPUs, GMIs per GPU and the roles the layout gives them (each GMI's slice follows from
the backend). The *learning* is the global batch: environments of all simulator GMIs (``batch.total_envs``) and
samples of one gradient step over all trainer GMIs (``batch.total_minibatch``), with the horizon and mini-epochs.
With a global batch set, every partition derives its per-GMI ``num_envs`` and ``minibatch_size`` from the totals,
so moving between partitions (``gmiexp.launch.elastic``) leaves the learning as it was: PPO's per-GMI gradients
of equal-sized minibatches, averaged by the reduction, are the gradient of the whole minibatch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gmiexp.errors import ConfigError
from gmiexp.plan.minibatch import fit_minibatch
from gmiexp.plan.model import GlobalBatch, Plan

#: what a re-shape request may change besides gmis_per_gpu (``gmiexp.launch.elastic.request``: config keys), and
#: the :class:`Partition` field each sets: a GMI's slice (cores, MPS share), the agent:trainer split
REQUEST_FIELDS = {"hardware.cpus": "cpus", "backend.sm_percent": "sm_percent",
                  "layout.trainers_per_gpu": "trainers_per_gpu"}


@dataclass
class Partition:
    """A cut of one job into GMIs, as a re-shape asks the planner for it (``gmiexp.planner.build.replanner``).

    The global batch is not part of it: every partition of a run keeps its plan's. ``None``: as the run started.
    """

    gmis_per_gpu: int
    trainers_per_gpu: int | None = None  # layout.trainers_per_gpu: an experience layout's trainer GMIs per GPU
    cpus: list[int] | None = None  # hardware.cpus: the cores the run's GMIs may use
    sm_percent: list[int] | None = None  # backend.sm_percent: each GMI's MPS share

    def moved(self, gmis_per_gpu: int, overrides: dict[str, Any] | None = None) -> Partition:
        """The partition moved to ``gmis_per_gpu`` with a request's ``overrides``; what they leave out stays.

        ``overrides``: config keys of :data:`REQUEST_FIELDS` (ConfigError naming another key).
        """
        changes: dict[str, Any] = {"gmis_per_gpu": int(gmis_per_gpu)}
        for key, value in (overrides or {}).items():
            if key not in REQUEST_FIELDS:
                raise ConfigError(f"invalid re-shape override {key}; valid: {', '.join(REQUEST_FIELDS)}")
            changes[REQUEST_FIELDS[key]] = value
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class PerGmiBatch:
    """Each GMI's part of a global batch in one partition."""

    num_envs: int  # environments of each simulator GMI
    minibatch_size: int  # samples of each trainer GMI's minibatch


def counts(plan: Plan) -> tuple[int, int]:
    """(simulator GMIs, trainer GMIs) of a plan: who divides the environments, who divides the minibatch."""
    sims = sum(1 for g in plan.gmis if g.has("simulator"))
    trainers = len(plan.trainer_group) or sims
    return sims, trainers


def fits(plan: Plan, batch: GlobalBatch, horizon: int) -> str | None:
    """Why ``plan``'s GMIs cannot share ``batch`` evenly (None when they can)."""
    sims, trainers = counts(plan)
    if batch.total_envs % sims:
        return f"{batch.total_envs} environments do not divide evenly over {sims} simulator GMIs"
    if batch.total_minibatch % trainers:
        return f"a minibatch of {batch.total_minibatch} does not divide evenly over {trainers} trainer GMIs"
    per_batch = batch.total_envs * horizon // trainers
    if per_batch % (batch.total_minibatch // trainers):
        return (f"each trainer's minibatch {batch.total_minibatch // trainers} does not divide its batch "
                f"{per_batch} (horizon {horizon} x its share of {batch.total_envs} environments)")
    return None


def per_gmi(plan: Plan, batch: GlobalBatch) -> PerGmiBatch | None:
    """Each GMI's part of ``batch`` in ``plan``'s partition (None when they cannot share it evenly: :func:`fits`).

    The one place the totals are divided: a plan's own GMIs (:func:`apply`) and every reachable partition's
    ``envs_per_gmi`` come from here.
    """
    if fits(plan, batch, int(plan.train.horizon_length)) is not None:
        return None
    sims, trainers = counts(plan)
    return PerGmiBatch(num_envs=batch.total_envs // sims, minibatch_size=batch.total_minibatch // trainers)


def refusal(plan: Plan, batch: GlobalBatch, reachable: list[int]) -> ConfigError:
    """Why ``plan``'s partition cannot share ``batch``, naming the ``gmis_per_gpu`` values that can."""
    why = fits(plan, batch, int(plan.train.horizon_length))
    valid = f"gmis_per_gpu in {reachable}" if reachable else \
        "batch totals that the GMIs divide evenly (none of gmis_per_gpu 1.. does now)"
    return ConfigError(f"invalid partition for batch.total_envs={batch.total_envs} batch.total_minibatch="
                       f"{batch.total_minibatch}: {why}; valid: {valid}")


def apply(plan: Plan, share: PerGmiBatch, batch: GlobalBatch) -> None:
    """Give every simulator GMI ``share.num_envs``, every trainer ``share.minibatch_size``; ``batch``: the plan's."""
    for g in plan.gmis:
        if g.has("simulator"):
            g.num_envs = share.num_envs
    plan.train.minibatch_size = share.minibatch_size
    plan.global_batch = batch


def gmis_per_gpu(plan: Plan) -> int:
    """The partition's GMIs per GPU as the user sets it (``gmis_per_gpu``; a layout may add trainer GMIs)."""
    set_by_user = plan.global_batch.gmis_per_gpu if plan.global_batch is not None else 0
    return set_by_user or max(len(ids) for ids in plan.gpu_map())


def global_batch(total_envs: int | None, total_minibatch: int | None, start: Plan,
                 fixed: bool = False) -> GlobalBatch | None:
    """The run's global batch from ``batch.*`` (None: per-GMI settings, the batch grows with the GMI count).

    Its totals only: the partitions that can share it are the planner's to find (``planner.build``).
    ``total_minibatch`` defaults to what one GMI holding the whole batch would step on: ``train.minibatch_size``,
    fitted to ``total_envs x horizon_length``, the same for every partition of the same ``batch.total_envs`` (it
    used to be the per-GMI minibatch times the starting partition's trainers, so ``gmis_per_gpu=2`` trained twice
    the minibatch of ``gmis_per_gpu=1`` on the same environments). ``fixed`` (a run that may re-shape): without
    ``batch.total_envs`` the starting partition's per-GMI settings are its global batch (``num_envs`` and
    ``train.minibatch_size`` on each of its GMIs).
    """
    horizon = int(start.train.horizon_length)
    if total_envs is None and fixed:
        _, trainers = counts(start)
        per_batch = horizon * max(1, start.total_envs() // trainers)
        start_minibatch = fit_minibatch(per_batch, int(start.train.minibatch_size)) * trainers
        return GlobalBatch(start.total_envs(), int(total_minibatch or start_minibatch))
    if total_envs is None:
        if total_minibatch is not None:
            raise ConfigError(f"invalid batch.total_minibatch={total_minibatch} without batch.total_envs; valid: "
                              "set batch.total_envs too (the global batch), or train.minibatch_size (per GMI)")
        return None
    if total_minibatch is None:  # one GMI's minibatch on the whole batch: the same for every partition
        total_minibatch = fit_minibatch(horizon * int(total_envs), int(start.train.minibatch_size))
    return GlobalBatch(int(total_envs), int(total_minibatch))
