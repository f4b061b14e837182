"""Which environments of one process's batch a GMI stands for, and minibatches that together are one process's.

rsl_rl cuts its ``(step, environment)`` storage two ways (``RolloutStorage``). The feed-forward generator
flattens it time-major, row ``t * N + e`` of ``N`` environments, draws one ``randperm`` of the rows per update and
cuts it into ``num_mini_batches`` contiguous minibatches, the same for every learning epoch. The recurrent
generator cuts the environments into ``num_mini_batches`` contiguous blocks, every step of each.

GMI ``rank`` of ``G`` with equal shares of ``n`` environments stands for the environments
:func:`gmiexp.plan.minibatch.gmi_envs` assigns it (the rule rl-games' GMIs follow) with ``e = n / num_mini_batches``:
its local environment ``k`` is global environment ``(k // e) * e * G + rank * e + k % e``, so its recurrent block
``i`` is its part of one process's block ``i`` (:func:`gmi_columns`; unequal shares, or ``n`` not a multiple of
``num_mini_batches``: contiguous blocks in group order). :class:`GroupRolloutStorage` draws the feed-forward
permutation of all ``T * N`` global rows from a generator seeded with the run's seed, the same on every GMI, and
keeps its own rows of each minibatch (:func:`gmi_minibatches`): the union over the GMIs of minibatch ``i`` is one
process's minibatch ``i`` with either cut.
"""

from __future__ import annotations

from collections.abc import Generator

import torch
from rsl_rl.storage import RolloutStorage

from gmiexp.comm.moments import Moments, group_moments
from gmiexp.plan.minibatch import gmi_envs
from gmiexp.rl.rslrl.sync import GroupSync, standardise


def gmi_columns(rank: int, shares: list[int], num_mini_batches: int) -> list[int]:
    """The global environments GMI ``rank``'s local environments stand for, in its order (see the module).

    ``shares``: every group rank's environments; ``num_mini_batches``: rsl_rl's, one process's on the whole batch.
    """
    n = shares[rank]
    if len(set(shares)) == 1 and n % num_mini_batches == 0:
        return gmi_envs(rank, len(shares), n, n // num_mini_batches)
    offset = sum(shares[:rank])
    return list(range(offset, offset + n))


def gmi_minibatches(perm: torch.Tensor, num_mini_batches: int, num_envs: int,
                    columns: list[int]) -> list[torch.Tensor]:
    """The local rows, minibatch by minibatch, of the GMI whose environments are ``columns`` of ``num_envs``.

    ``perm`` is one process's permutation of its time-major rows (``num_mini_batches`` equal minibatches); local
    row ``t * len(columns) + k`` is global row ``t * num_envs + columns[k]``.
    """
    local = torch.full((num_envs,), -1, dtype=torch.long)
    local[torch.tensor(columns, dtype=torch.long)] = torch.arange(len(columns))
    size = perm.numel() // num_mini_batches
    rows = []
    for i in range(num_mini_batches):
        idx = perm[i * size:(i + 1) * size]
        k = local[idx % num_envs]
        mine = k >= 0
        rows.append(idx[mine] // num_envs * len(columns) + k[mine])
    return rows


class GroupRolloutStorage(RolloutStorage):
    """rsl_rl's storage whose minibatches are this GMI's part of one process's minibatches.

    Feed-forward: every GMI draws the permutation of the group's rows from a generator seeded with the run's seed
    (``group.seed``), so the GMIs agree without a collective. A GMI's share of a minibatch varies (``m`` of the
    minibatch's ``M`` rows); while it is yielded, ``group.weight`` is ``m * world / M``, the factor by which the
    GMI's mean loss (its gradient, its KL) counts in the group's average, so that the average is the mean over
    the ``M`` rows one process takes. A GMI with no row of a minibatch trains on one row of its own with weight 0
    (rsl_rl's update cannot take an empty minibatch). Recurrent: rsl_rl's own generator, every GMI's block ``i``
    its equal part of one process's block ``i`` (:func:`gmi_columns`).

    With ``per_minibatch_advantages`` the advantages of each minibatch are normalised here over the union of the
    GMIs' rows (one small collective per minibatch and update), and rsl_rl's own per-minibatch normalisation must
    be off (``GMIPPO`` turns it off).
    """

    def __init__(self, like: RolloutStorage, group: GroupSync, per_minibatch_advantages: bool) -> None:
        super().__init__(like.training_type, like.num_envs, like.num_transitions_per_env, like.observations[0],
                         like.actions_shape, like.device)
        self.group = group
        self.per_minibatch_advantages = per_minibatch_advantages
        self.shares = group.shares(like.num_envs)
        self.rng = torch.Generator().manual_seed(int(group.seed))

    def over_group(self, a: torch.Tensor, rows: int | None = None) -> Moments:
        """The moments of the group's advantages of one minibatch (this GMI's: the first ``rows`` of ``a``)."""
        return group_moments(a.reshape(-1, 1)[:rows], self.group.sum_)

    def mini_batch_generator(self, num_mini_batches: int,
                             num_epochs: int = 8) -> Generator[RolloutStorage.Batch, None, None]:
        """rsl_rl's feed-forward generator over this GMI's rows of one process's minibatches (see the class)."""
        total = sum(self.shares)
        size = total * self.num_transitions_per_env // num_mini_batches
        perm = torch.randperm(num_mini_batches * size, generator=self.rng)
        rows = gmi_minibatches(perm, num_mini_batches, total,
                               gmi_columns(self.group.rank, self.shares, num_mini_batches))
        weights = [len(r) * self.group.world / size for r in rows]

        observations = self.observations.flatten(0, 1)
        actions = self.actions.flatten(0, 1)
        values = self.values.flatten(0, 1)
        returns = self.returns.flatten(0, 1)
        old_actions_log_prob = self.actions_log_prob.flatten(0, 1)
        advantages = self.advantages.flatten(0, 1)
        old_distribution_params = tuple(p.flatten(0, 1) for p in self.distribution_params)  # type: ignore[union-attr]

        idx = [(r if len(r) else torch.zeros(1, dtype=torch.long)).to(self.device) for r in rows]
        adv = [advantages[i] for i in idx]
        if self.per_minibatch_advantages:  # rsl_rl's per-minibatch normalisation, over the group's minibatch
            adv = [standardise(a, self.over_group(a, len(r))) for a, r in zip(adv, rows, strict=True)]
        try:
            for _ in range(num_epochs):
                for i, batch_idx in enumerate(idx):
                    self.group.weight = weights[i]
                    yield RolloutStorage.Batch(
                        observations=observations[batch_idx],  # type: ignore[arg-type]
                        actions=actions[batch_idx],
                        values=values[batch_idx],
                        advantages=adv[i],
                        returns=returns[batch_idx],
                        old_actions_log_prob=old_actions_log_prob[batch_idx],
                        old_distribution_params=tuple(p[batch_idx] for p in old_distribution_params),
                    )
        finally:
            self.group.weight = 1.0

    def recurrent_mini_batch_generator(self, num_mini_batches: int,
                                       num_epochs: int = 8) -> Generator[RolloutStorage.Batch, None, None]:
        """rsl_rl's recurrent generator; per-minibatch advantages normalised over the group's block."""
        moments: list[Moments] = []
        for k, batch in enumerate(super().recurrent_mini_batch_generator(num_mini_batches, num_epochs)):
            if self.per_minibatch_advantages:
                if k < num_mini_batches:  # the same blocks every epoch: one collective per block and update
                    moments.append(self.over_group(batch.advantages))  # type: ignore[arg-type]
                batch.advantages = standardise(batch.advantages, moments[k % num_mini_batches])  # type: ignore[arg-type]
            yield batch
