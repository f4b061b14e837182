"""Index manager (GEAR 3.2): block allocator and status table, shared by every client process.

Status, commit stamps and priorities live in one shared-memory segment; allocate/commit/release
take an ``flock`` on it, which the kernel drops if the holder dies, so a killed client cannot
leave the store locked.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import numpy as np
import torch

from gmiexp.errors import invalid
from gmiexp.shm import segment

Eviction = Literal["fifo", "lifo"]
EVICTIONS = ("fifo", "lifo")
FREE, WRITING, READY = 0, 1, 2


class StoreFull(RuntimeError):
    """Every row is being written: nothing can be allocated or evicted."""


class IndexManager:
    """Row states (free / writing / ready), commit stamps (for FIFO/LIFO) and priorities."""

    def __init__(self, seg: segment.Segment, capacity: int, eviction: Eviction) -> None:
        if eviction not in EVICTIONS:
            raise invalid("eviction", eviction, EVICTIONS)
        self.seg, self.capacity, self.eviction = seg, capacity, eviction
        self._fd = os.open(seg.path, os.O_RDWR)  # for flock; valid after the name is unlinked
        # flock excludes other processes only: threads share this fd's lock, so they take this first
        self._thread_lock = threading.RLock()
        self._depth = 0
        buf = seg.buf
        self._clock = np.frombuffer(buf, np.int64, 1, 0)
        self.stamp = torch.from_numpy(np.frombuffer(buf, np.int64, capacity, 8))
        self.priority = torch.from_numpy(np.frombuffer(buf, np.float64, capacity, 8 + 8 * capacity))
        self.status = torch.from_numpy(np.frombuffer(buf, np.int8, capacity, 8 + 16 * capacity))

    @staticmethod
    def nbytes(capacity: int) -> int:
        return 8 + 17 * capacity

    @contextmanager
    def locked(self) -> Iterator[None]:
        with self._thread_lock:
            outer = self._depth == 0  # re-entrant: only the outermost level takes/drops the flock
            if outer:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if outer:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)

    def allocate(self, n: int) -> torch.Tensor:
        """Reserve ``n`` rows for writing, evicting ready rows (FIFO: oldest, LIFO: newest) if needed."""
        with self.locked():
            free = (self.status == FREE).nonzero().flatten()
            if free.numel() < n:
                self._evict(n - free.numel())
                free = (self.status == FREE).nonzero().flatten()
            idx = free[:n]
            self.status[idx] = WRITING
            return idx

    def _evict(self, n: int) -> None:
        ready = (self.status == READY).nonzero().flatten()
        if ready.numel() < n:
            raise StoreFull(f"need {n} rows, only {ready.numel()} evictable of {self.capacity}")
        order = torch.argsort(self.stamp[ready], descending=self.eviction == "lifo")
        victims = ready[order[:n]]
        self.status[victims] = FREE
        self.priority[victims] = 0.0

    def commit(self, idx: torch.Tensor, priority: torch.Tensor | float = 1.0) -> None:
        """Make written rows selectable; stamps increase in commit order."""
        with self.locked():
            clock = int(self._clock[0])
            self.stamp[idx] = torch.arange(clock, clock + idx.numel(), dtype=torch.int64)
            self._clock[0] = clock + idx.numel()
            self.priority[idx] = torch.as_tensor(priority, dtype=torch.float64)
            self.status[idx] = READY

    def release(self, idx: torch.Tensor) -> None:
        """Free rows (no longer selectable)."""
        with self.locked():
            self.status[idx] = FREE
            self.priority[idx] = 0.0

    def ready(self) -> torch.Tensor:
        return (self.status == READY).nonzero().flatten()

    def close(self) -> None:
        os.close(self._fd)
        del self.stamp, self.priority, self.status, self._clock
        self.seg.close()
