"""Row sources: what the Batcher reads, one per (route, field).

They hide whether rows came over a
dedicated field ring (multi) or were demultiplexed from the one generic ring (uni).
"""

from __future__ import annotations

from collections import deque

import torch

from gmiexp.comm.channels.ring import ChannelClosed, Item, SlotRing


class RingRowSource:
    """Rows of one field from its own ring; views stay in shared memory until fully consumed."""

    def __init__(self, ring: SlotRing) -> None:
        self.ring = ring
        self._item: Item | None = None
        self._off = 0
        self._head: tuple[int, torch.Tensor] | None = None  # cached peek() of the current item

    def peek(self) -> tuple[int, torch.Tensor] | None:
        """(index of the first pending row, view of the pending rows), or None if nothing is ready."""
        head = self._head
        if head is not None:
            return head
        item = self._item
        if item is None:
            if not self.ring.poll():
                return None
            item, self._off = self.ring.recv(), 0
            self._item = item
        off = self._off
        head = self._head = (item.row0 + off, item.data[off:] if off else item.data)
        return head

    def consume(self, k: int) -> None:
        """Mark ``k`` peeked rows used; the slot goes back to the producer when all are."""
        self._off += k
        self._head = None
        if self._off >= self._item.data.shape[0]:
            self._item = None
            self.ring.release()

    @property
    def exhausted(self) -> bool:
        return self._item is None and self.ring.closed and not self.ring.poll()


class UniDemux:
    """Drains the uni-channel ring into per-field queues (cloning: release is in ring order)."""

    def __init__(self, ring: SlotRing, n_fields: int) -> None:
        self.ring = ring
        self.queues: list[deque[tuple[int, torch.Tensor]]] = [deque() for _ in range(n_fields)]

    def pump(self) -> None:
        while self.ring.poll():
            try:
                item = self.ring.recv_copy()
            except ChannelClosed:
                return
            self.queues[item.tag].append((item.row0, item.data))


class UniRowSource:
    """Rows of one field, taken from the demultiplexed uni ring."""

    def __init__(self, demux: UniDemux, index: int) -> None:
        self.demux, self.q = demux, demux.queues[index]
        self._off = 0

    def peek(self) -> tuple[int, torch.Tensor] | None:
        if not self.q:
            self.demux.pump()
            if not self.q:
                return None
        row0, data = self.q[0]
        return row0 + self._off, data[self._off :]

    def consume(self, k: int) -> None:
        self._off += k
        if self._off >= self.q[0][1].shape[0]:
            self.q.popleft()
            self._off = 0

    @property
    def exhausted(self) -> bool:
        return not self.q and self.demux.ring.closed and not self.demux.ring.poll()
