"""The per-process GMI manager (the paper's ``GMI_manager``): process groups and point-to-point.

The default process group is always gloo (it works between GMIs on the same
GPU, where NCCL refuses two ranks); NCCL is only ever used in sub-groups
whose members sit on distinct GPUs.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import torch
import torch.distributed as dist

from gmiexp.device import host_staging, resolve_device
from gmiexp.plan import GMI, Plan
from gmiexp.shm import names


class GMIManager:
    """Knows the Plan and this process's GMI; owns process-group set-up and tear-down."""

    def __init__(self, plan: Plan, gmi_id: int) -> None:
        self.plan = plan
        self.gmi: GMI = plan.gmi(gmi_id)
        self._groups: dict[tuple[int, ...], object] = {}
        self._owns_pg = False
        self._device: torch.device | None = None

    # ---- set-up --------------------------------------------------------
    @property
    def rank(self) -> int:
        return self.gmi.id

    @property
    def world_size(self) -> int:
        return self.plan.world_size

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def init(self, timeout_s: float) -> None:
        """Join the gloo default group (rendezvous from the launcher's MASTER_ADDR/PORT env).

        ``timeout_s``: ``launch.collective_timeout_s``.
        """
        if not self.distributed or dist.is_initialized():
            return
        dist.init_process_group(
            "gloo",
            rank=self.rank,
            world_size=self.world_size,
            timeout=timedelta(seconds=timeout_s),
        )
        self._owns_pg = True

    def close(self, finished: bool = False) -> None:
        """Tear the process group down; ``finished``: first wait until every GMI is done with it.

        A GMI that destroys its gloo connections while a peer is still using them can make that
        peer abort in C++ (``terminate called without an active exception``) after its work is
        done, which fails the whole run. Only a GMI that finished cleanly waits: after an error
        the launcher stops everyone anyway.
        """
        if self._owns_pg and dist.is_initialized():
            if finished:  # peers may legitimately run much longer (a trainer draining): no short timeout
                try:
                    dist.monitored_barrier(timeout=timedelta(days=1))
                except RuntimeError:  # a peer failed: the launcher stops everyone; tear down regardless
                    pass
            dist.destroy_process_group()
            self._owns_pg = False

    # ---- groups --------------------------------------------------------
    def group(self, ranks: list[int], backend: str = "gloo") -> object | None:
        """A sub-group of ``ranks`` (cached). Collective: every GMI must ask for the same groups in order."""
        key = (*sorted(ranks), hash(backend))
        if not self.distributed:
            return None
        if key not in self._groups:
            if sorted(ranks) == list(range(self.world_size)) and backend == "gloo":
                self._groups[key] = dist.group.WORLD
            else:
                self._groups[key] = dist.new_group(sorted(ranks), backend=backend)
        return self._groups[key]

    @property
    def run_tag(self) -> str:
        """Short id unique to this run, for naming shared-memory segments (``/dev/shm/gmiexp_<tag>_*``)."""
        return names.run_tag(default=hashlib.sha1((self.plan.run_dir or "inprocess").encode()).hexdigest()[:10])

    @property
    def torch_device(self) -> torch.device:
        """The device every role of this GMI uses: ``train.device`` resolved (see :mod:`gmiexp.device`)."""
        if self._device is None:
            self._device = resolve_device(str(self.plan.train.device))
        return self._device

    # ---- collectives over every GMI (the default group) ------------------
    def all_reduce_(self, t: torch.Tensor) -> torch.Tensor:
        """Sum ``t`` in place over every GMI (through the host where gloo cannot reduce the device)."""
        if not self.distributed:
            return t
        if host_staging(t.device):
            host = t.cpu()
            dist.all_reduce(host, op=dist.ReduceOp.SUM)
            t.copy_(host)
        else:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t

    def broadcast_(self, t: torch.Tensor, src: int = 0) -> torch.Tensor:
        """Copy GMI ``src``'s ``t`` into ``t`` of every GMI (through the host where gloo needs it)."""
        if not self.distributed:
            return t
        if host_staging(t.device):
            host = t.cpu()
            dist.broadcast(host, src=src)
            t.copy_(host)
        else:
            dist.broadcast(t, src=src)
        return t

    def broadcast_float(self, value: float, src: int = 0) -> float:
        """GMI ``src``'s ``value`` on every GMI (a learning rate, a stop flag), exactly."""
        return float(self.broadcast_(torch.tensor([value], dtype=torch.float64), src).item())

    def mean_float(self, value: float) -> float:
        """The mean of ``value`` over every GMI, bit-identical on each (a KL divergence)."""
        return float(self.all_reduce_(torch.tensor([value], dtype=torch.float64)).item()) / self.world_size

    def sum_int(self, value: int) -> int:
        """The sum of ``value`` over every GMI (frames stepped in an epoch)."""
        return int(self.all_reduce_(torch.tensor([value], dtype=torch.int64)).item())

    # ---- point-to-point ------------------------------------------------
    def send(self, tensor: torch.Tensor, dst_gmi: int) -> None:
        """Blocking send to another GMI (gloo: through host memory)."""
        dist.send(tensor.detach().cpu().contiguous(), dst=dst_gmi)

    def recv(self, like: torch.Tensor, src_gmi: int) -> torch.Tensor:
        """Receive into a tensor shaped like ``like`` from ``src_gmi``."""
        buf = torch.empty_like(like, device="cpu")
        dist.recv(buf, src=src_gmi)
        return buf.to(like.device)
