"""A partition and the global batch it must keep: how one job is cut into GMIs without changing its learning.

A *partition* is the cut: GPUs, GMIs per GPU and the roles the layout gives them (each GMI's slice follows from
the backend). The *learning* is the global batch: environments of all simulator GMIs (``batch.total_envs``) and
samples of one gradient step over all trainer GMIs (``batch.total_minibatch``), with the horizon and mini-epochs.
With a global batch set, every partition derives its per-GMI ``num_envs`` and ``minibatch_size`` from the totals,
so moving between partitions (``gmiexp.launch.elastic``) leaves the learning as it was: PPO's per-GMI gradients
of equal-sized minibatches, averaged by the reduction, are the gradient of the whole minibatch.
"""

from __future__ import annotations

from dataclasses import dataclass

from gmiexp.errors import ConfigError
from gmiexp.plan.model import Plan


@dataclass(frozen=True)
class GlobalBatch:
    total_envs: int
    total_minibatch: int

    def to_dict(self) -> dict[str, int]:
        return {"total_envs": self.total_envs, "total_minibatch": self.total_minibatch}


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


def gmis_per_gpu(plan: Plan) -> int:
    """The partition's GMIs per GPU as the user sets it (``gmis_per_gpu``; a layout may add trainer GMIs)."""
    return int(plan.global_batch.get("gmis_per_gpu", 0)) or max(len(ids) for ids in plan.gpu_map())


def apply_global_batch(plan: Plan, batch: GlobalBatch, reachable: list[int] | None = None,
                       per_gpu: int = 0) -> None:
    """Set every simulator GMI's ``num_envs`` and the per-GMI minibatch from the totals (ConfigError if uneven).

    ``reachable``: the GMIs-per-GPU values that can share this batch, named in the refusal.
    """
    why = fits(plan, batch, int(plan.train.horizon_length))
    if why:
        valid = f"gmis_per_gpu in {reachable}" if reachable else \
            "batch totals that the GMIs divide evenly (none of gmis_per_gpu 1.. does now)"
        raise ConfigError(f"invalid partition for batch.total_envs={batch.total_envs} batch.total_minibatch="
                          f"{batch.total_minibatch}: {why}; valid: {valid}")
    sims, trainers = counts(plan)
    for g in plan.gmis:
        if g.has("simulator"):
            g.num_envs = batch.total_envs // sims
    plan.train.minibatch_size = batch.total_minibatch // trainers
    plan.global_batch = {**batch.to_dict(), "reachable": list(reachable or []), "gmis_per_gpu": per_gpu}


def global_batch(total_envs: int | None, total_minibatch: int | None, start: Plan,
                 fixed: bool = False) -> GlobalBatch | None:
    """The run's global batch from ``batch.*`` (None: per-GMI settings, the batch grows with the GMI count).

    ``total_minibatch`` defaults to what one GMI holding the whole batch would step on: ``train.minibatch_size``,
    fitted to ``total_envs x horizon_length``, the same for every partition of the same ``batch.total_envs`` (it
    used to be the per-GMI minibatch times the starting partition's trainers, so ``gmis_per_gpu=2`` trained twice
    the minibatch of ``gmis_per_gpu=1`` on the same environments). ``fixed`` (a run that may re-shape): without
    ``batch.total_envs`` the starting partition's per-GMI settings are its global batch (``num_envs`` and
    ``train.minibatch_size`` on each of its GMIs).
    """
    from gmiexp.plan.minibatch import fit_minibatch

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
