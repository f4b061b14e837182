"""One flat all-reduce over the trainer group: what rl-games does (on gloo here)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.reduction.strategy import REDUCTIONS, Reduction
from gmiexp.device import host_staging


@REDUCTIONS.register("allreduce")
class AllReduce(Reduction):
    name = "allreduce"

    def __init__(self, mgr: GMIManager, members: list[int]) -> None:
        super().__init__(mgr, members)
        # new_group is collective, so every GMI asks; an empty or 1-member group reduces nothing
        self.group = mgr.group(self.members) if len(self.members) > 1 else None

    def _reduce(self, flat: torch.Tensor) -> None:
        if host_staging(flat.device):  # gloo reduces host and CUDA tensors only
            host = flat.cpu()
            dist.all_reduce(host, op=dist.ReduceOp.SUM, group=self.group)
            flat.copy_(host)
            return
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.group)
