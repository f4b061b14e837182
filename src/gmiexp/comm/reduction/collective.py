"""The collectives MRR and HAR are built from, as an object, so the same code runs on any transport.

:class:`TorchCollective` uses ``torch.distributed`` sub-groups through the
GMI manager (NCCL on GPUs, gloo on CPU); :class:`LocalCollective` runs the
members as threads of one process (serial mode and tests).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

import torch
import torch.distributed as dist

from gmiexp.comm.manager import GMIManager


class Collective(Protocol):
    """What a layout-aware strategy needs from the transport."""

    rank: int

    def prepare(self, groups: Sequence[Sequence[int]]) -> None:
        """Create sub-groups; collective: every GMI passes the same list."""

    def barrier(self) -> None:
        """Barrier over every GMI of the run."""

    def all_reduce(self, t: torch.Tensor, ranks: Sequence[int]) -> None:
        """Sum ``t`` in place over ``ranks`` (identical result on each)."""

    def broadcast(self, t: torch.Tensor, src: int, ranks: Sequence[int]) -> None:
        """Copy ``t`` of ``src`` into ``t`` of every rank in ``ranks``."""


def transport_backend(mgr: GMIManager) -> str:
    """NCCL for sub-groups of GMIs on real GPUs, gloo otherwise (CPU, logical GPU ids)."""
    on_gpu = torch.cuda.is_available() and mgr.torch_device.type == "cuda" and dist.is_nccl_available()
    return "nccl" if on_gpu else "gloo"


class TorchCollective:
    """``torch.distributed`` through the manager's cached sub-groups."""

    def __init__(self, mgr: GMIManager, backend: str | None = None) -> None:
        self.mgr = mgr
        self.rank = mgr.rank
        self.backend = backend or transport_backend(mgr)

    def _group(self, ranks: Sequence[int]) -> object | None:
        return self.mgr.group(list(ranks), backend=self.backend)

    def prepare(self, groups: Sequence[Sequence[int]]) -> None:
        for g in groups:
            if len(g) > 1:
                self._group(g)

    def barrier(self) -> None:
        if self.mgr.distributed and dist.is_initialized():
            dist.barrier()

    def _on_transport(self, t: torch.Tensor) -> tuple[torch.Tensor, bool]:
        if self.backend == "nccl" and not t.is_cuda:
            return t.to(self.mgr.torch_device), True
        if self.backend == "gloo" and t.device.type != "cpu":  # CUDA, and devices gloo cannot reduce (lazy)
            return t.cpu(), True
        return t, False

    def all_reduce(self, t: torch.Tensor, ranks: Sequence[int]) -> None:
        if len(ranks) < 2:
            return
        x, moved = self._on_transport(t)
        dist.all_reduce(x, op=dist.ReduceOp.SUM, group=self._group(ranks))
        if moved:
            t.copy_(x)

    def broadcast(self, t: torch.Tensor, src: int, ranks: Sequence[int]) -> None:
        if len(ranks) < 2:
            return
        x, moved = self._on_transport(t)
        dist.broadcast(x, src=src, group=self._group(ranks))
        if moved:
            t.copy_(x)


class LocalWorld:
    """Rendezvous for :class:`LocalCollective` members running as threads of one process."""

    def __init__(self, world_size: int, timeout_s: float = 60.0) -> None:
        self.world_size = world_size
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._rooms: dict[tuple, _Room] = {}
        self._world_barrier = threading.Barrier(world_size)

    def room(self, key: tuple, n: int) -> _Room:
        with self._lock:
            r = self._rooms.get(key)
            if r is None:
                r = self._rooms[key] = _Room(n)
            r.users += 1
            if r.users == n:  # last one in: nobody else will look it up
                del self._rooms[key]
            return r

    def collective(self, rank: int) -> LocalCollective:
        return LocalCollective(self, rank)


class _Room:
    def __init__(self, n: int) -> None:
        self.barrier = threading.Barrier(n)
        self.slots: dict[int, torch.Tensor] = {}
        self.users = 0


class LocalCollective:
    """In-process collective: sums in rank order in float32, so every member gets identical bytes."""

    def __init__(self, world: LocalWorld, rank: int) -> None:
        self.world = world
        self.rank = rank
        self._seq: dict[tuple[int, ...], int] = {}

    def _enter(self, ranks: Sequence[int]) -> _Room:
        key = tuple(sorted(ranks))
        seq = self._seq.get(key, 0)
        self._seq[key] = seq + 1
        return self.world.room((key, seq), len(key))

    def prepare(self, groups: Sequence[Sequence[int]]) -> None:
        return None

    def barrier(self) -> None:
        self.world._world_barrier.wait(self.world.timeout_s)

    def all_reduce(self, t: torch.Tensor, ranks: Sequence[int]) -> None:
        if len(ranks) < 2:
            return
        room = self._enter(ranks)
        room.slots[self.rank] = t.detach().to("cpu", torch.float32, copy=True)
        room.barrier.wait(self.world.timeout_s)
        order = sorted(room.slots)
        acc = room.slots[order[0]].clone()
        for r in order[1:]:
            acc.add_(room.slots[r])
        room.barrier.wait(self.world.timeout_s)
        t.copy_(acc)

    def broadcast(self, t: torch.Tensor, src: int, ranks: Sequence[int]) -> None:
        if len(ranks) < 2:
            return
        room = self._enter(ranks)
        if self.rank == src:
            room.slots[src] = t.detach().clone()
        room.barrier.wait(self.world.timeout_s)
        if self.rank != src:
            t.copy_(room.slots[src])
        room.barrier.wait(self.world.timeout_s)
