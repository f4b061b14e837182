"""MRR, multi-ring reduction (paper section 4.1, Figure 4b).

With ``t`` GMIs on each of ``g`` GPUs (GPU d holds ``mpl[d]``):

1. ring k (k < t) joins the k-th GMI of every GPU, ``[mpl[0][k], ..., mpl[g-1][k]]``,
   one GMI per GPU, and all-reduces inside itself;
2. the representatives ``mpl[k][k]`` (ring k's member on GPU k, so all on
   distinct GPUs) all-reduce the ring sums;
3. each representative broadcasts the total inside its ring.

Every communicator therefore holds at most one GMI per GPU (what NCCL
allows), which is why ``t <= g`` is required. Transport: NCCL sub-groups on
real GPUs, gloo on CPU (logical GPU ids).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.reduction.collective import Collective, TorchCollective
from gmiexp.comm.reduction.strategy import REDUCTIONS, Reduction
from gmiexp.costmodel.algorithm1 import mrr_limit
from gmiexp.errors import ConfigError


class MultiRing:
    """The ring structure of one layout, as seen by ``rank``."""

    def __init__(self, mpl: Sequence[Sequence[int]], rank: int, coll: Collective) -> None:
        why = mrr_limit(mpl)
        if why is not None:
            raise ConfigError(
                f"invalid reduction: 'mrr' cannot serve this layout: {why}; valid: har, mpr, allreduce"
            )
        g, t = len(mpl), len(mpl[0])
        self.rings = [[mpl[d][k] for d in range(g)] for k in range(t)]
        self.reps = [self.rings[k][k] for k in range(t)]
        self.coll = coll
        self.rank = rank
        coll.prepare([*self.rings, self.reps])
        self.ring: list[int] | None = None
        self.rep: int | None = None
        for k, ring in enumerate(self.rings):
            if rank in ring:
                self.ring, self.rep = ring, self.reps[k]

    def reduce(self, flat: torch.Tensor) -> None:
        """Sum ``flat`` in place over every GMI of the layout."""
        if self.ring is None:
            return
        self.coll.all_reduce(flat, self.ring)
        if len(self.reps) > 1:
            if self.rank in self.reps:
                self.coll.all_reduce(flat, self.reps)
            self.coll.broadcast(flat, self.rep, self.ring)


@REDUCTIONS.register("mrr")
class MRR(Reduction):
    """Multi-ring reduction over the members' GMI-to-GPU map."""

    name = "mrr"
    nccl = True

    def __init__(self, mgr: GMIManager, members: list[int], *, collective: Collective | None = None) -> None:
        super().__init__(mgr, members)
        self.rings = MultiRing(mgr.plan.gpu_map(self.members), mgr.rank, collective or TorchCollective(mgr))

    def _reduce(self, flat: torch.Tensor) -> None:
        self.rings.reduce(flat)
