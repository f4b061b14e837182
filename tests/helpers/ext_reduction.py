"""A gradient reduction defined outside src/ in one file (tests/test_extension_points.py).

``reduction.name=ext_reduction:CountingSum``: a plain gloo sum over the trainer group that records, per call,
the sum of its input and of its result in ``<run_dir>/ext_reduction/gmi<rank>.json``, so a test can check that
the GMIs' gradients went through it and that the result is their sum. Built in every GMI process (the
reduction registry imports ``module:Class`` there).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.reduction import Reduction

SPEC = f"{__name__}:CountingSum"
DIR = "ext_reduction"


class CountingSum(Reduction):
    name = SPEC

    def __init__(self, mgr: GMIManager, members: list[int]) -> None:
        super().__init__(mgr, members)
        self.group = mgr.group(self.members) if len(self.members) > 1 else None  # collective: every GMI asks
        self.record: dict = {"rank": mgr.rank, "pid": os.getpid(), "backend_gmi": os.environ.get("EXT_BACKEND_GMI"),
                             "numel": [], "pre": [], "post": []}

    def _reduce(self, flat: torch.Tensor) -> None:
        host = flat.detach().to("cpu", torch.float64)
        self.record["pre"].append(float(host.sum()))
        summed = flat.cpu()
        dist.all_reduce(summed, op=dist.ReduceOp.SUM, group=self.group)
        flat.copy_(summed)
        self.record["numel"].append(flat.numel())
        self.record["post"].append(float(summed.to(torch.float64).sum()))
        out = Path(self.mgr.plan.run_dir) / DIR
        out.mkdir(exist_ok=True)
        tmp = out / f".gmi{self.mgr.rank}.tmp"
        tmp.write_text(json.dumps(self.record))
        tmp.replace(out / f"gmi{self.mgr.rank}.json")
