"""The reduction interface every strategy (allreduce, MPR, MRR, HAR) implements, and their registry."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import ClassVar

import torch

from gmiexp.comm.manager import GMIManager
from gmiexp.registry import Registry


class Reduction(ABC):
    """Sum or average a flat tensor across the trainer GMIs, in place, identically on every member.

    Constructing one is collective: every GMI of the run (members or not)
    constructs the same strategy in the same order, because
    ``torch.distributed.new_group`` must be called by all ranks.
    """

    name: ClassVar[str] = ""
    #: Builds NCCL groups across GPUs (NCCL cannot join MIG instances, so backend=mig refuses it).
    nccl: ClassVar[bool] = False

    def __init__(self, mgr: GMIManager, members: list[int]) -> None:
        self.mgr = mgr
        self.members = sorted(members)
        self.comm_s = 0.0  # time spent inside reduce calls (time/comm_s)
        self.calls = 0

    @property
    def is_member(self) -> bool:
        return self.mgr.rank in self.members

    def allreduce_(self, flat: torch.Tensor, average: bool = True) -> torch.Tensor:
        """Reduce ``flat`` in place across the members; returns it."""
        t0 = time.perf_counter()
        if len(self.members) > 1 and self.is_member:
            self._reduce(flat)
            if average:
                flat.div_(len(self.members))
        self.comm_s += time.perf_counter() - t0
        self.calls += 1
        return flat

    @abstractmethod
    def _reduce(self, flat: torch.Tensor) -> None:
        """Sum ``flat`` in place across the members."""

    def close(self) -> None:  # noqa: B027 - optional hook: most strategies hold nothing to release
        """Release shared memory or groups the strategy holds."""


#: Every concrete strategy by name, filled by importing :mod:`gmiexp.comm.reduction` (``auto`` is not one:
#: it picks one of them by the paper's Algorithm 1).
REDUCTIONS: Registry[type[Reduction]] = Registry("reduction", load="gmiexp.comm.reduction")
