"""Batcher (one per trainer): slices large transfers and stacks small ones into training batches.

Each route (one agent) delivers every field as a stream of row chunks with a first-row index.
Rows with the same index in all fields of a route are one experience row, so the Batcher copies
``min(available)`` aligned rows per step straight from the shared-memory views into the batch,
and skips rows missing from some field (only possible when a producer drops on full).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gmiexp.comm.channels.channelset import ChannelSet, RowSource
from gmiexp.comm.channels.fields import FieldSpec
from gmiexp.comm.channels.ring import ChannelClosed
from gmiexp.errors import invalid
from gmiexp.shm.wait import Backoff


class Batcher:
    """Builds ``{field: tensor[batch_size, *shape]}`` batches from one or more routes."""

    def __init__(
        self,
        routes: Sequence[ChannelSet],
        batch_size: int,
        backoff: Backoff | None = None,
        zero_copy: bool = False,
    ) -> None:
        if not routes:
            raise invalid("routes per trainer", 0, ">= 1")
        if batch_size < 1:
            raise invalid("batch_size", batch_size, ">= 1")
        self.fields: list[FieldSpec] = routes[0].fields
        self._names = [f.name for f in self.fields]
        self.batch_size = batch_size
        self.backoff = backoff or Backoff()
        self._sources: list[list[RowSource]] = [r.sources() for r in routes]
        self._next = 0
        self.rows = 0
        self.skipped_rows = 0
        self._out: dict[str, torch.Tensor] | None = None
        self._fill = 0
        self.zero_copy = zero_copy
        self._deferred: list[tuple[RowSource, int]] = []

    def _new_out(self) -> None:
        self._out = {f.name: torch.empty(self.batch_size, *f.shape, dtype=f.dtype) for f in self.fields}
        self._fill = 0

    def _take(self, srcs: list[RowSource]) -> bool:
        """Copy aligned rows of one route into the batch; False if some field has nothing ready."""
        heads = []
        for s in srcs:
            h = s.peek()
            if h is None:
                return False
            heads.append(h)
        first = max(h[0] for h in heads)
        if any(h[0] != first for h in heads):  # rows dropped in some field: skip to the common row
            for s, (row, data) in zip(srcs, heads, strict=True):
                k = min(first - row, data.shape[0])
                if k > 0:
                    s.consume(k)
                    self.skipped_rows += k
            return True
        k = min(self.batch_size - self._fill, *(h[1].shape[0] for h in heads))
        for f, s, (_, data) in zip(self.fields, srcs, heads, strict=True):
            self._out[f.name][self._fill : self._fill + k].copy_(data[:k])
            s.consume(k)
        self._fill += k
        return True

    def _view_batch(self, srcs: list[RowSource]) -> dict[str, torch.Tensor] | None:
        """Slice a whole batch out of the current transfers without copying, if they hold one."""
        bs, row, views = self.batch_size, None, []
        for s in srcs:
            h = s.peek()
            if h is None:
                return None
            data = h[1]
            n = data.shape[0]
            if n < bs:
                return None
            if row is None:
                row = h[0]
            elif h[0] != row:
                return None
            views.append(data if n == bs else data[:bs])
        self._deferred = [(s, bs) for s in srcs]
        self.rows += bs
        return dict(zip(self._names, views, strict=True))

    def try_batch(self) -> dict[str, torch.Tensor] | None:
        """Make progress without waiting; a full batch when one is ready.

        With ``zero_copy=True`` a batch that lies inside the current transfers is returned as
        views into shared memory, valid until the next call (slots are released then).
        """
        for src, k in self._deferred:
            src.consume(k)
        self._deferred = []
        n = len(self._sources)
        for j in range(n):
            srcs = self._sources[(self._next + j) % n]
            if self.zero_copy and (self._out is None or self._fill == 0):
                view = self._view_batch(srcs)
                if view is not None:
                    self._next = (self._next + j + 1) % n
                    return view
            if self._out is None:
                self._new_out()
            while self._fill < self.batch_size and self._take(srcs):
                pass
            if self._fill == self.batch_size:
                self._next = (self._next + j + 1) % n
                return self._emit(self.batch_size)
        return None

    def _emit(self, k: int) -> dict[str, torch.Tensor]:
        out = {name: t[:k] for name, t in self._out.items()}
        self.rows += k
        self._out = None
        return out

    @property
    def exhausted(self) -> bool:
        return all(s.exhausted for srcs in self._sources for s in srcs)

    def next_batch(self, timeout: float | None = None) -> dict[str, torch.Tensor]:
        """Wait for a full batch; at end of stream the last partial one, then ChannelClosed."""
        batch = self.try_batch()
        if batch is not None:
            return batch
        state: dict[str, dict[str, torch.Tensor] | None] = {"batch": None}

        def ready() -> bool:
            state["batch"] = self.try_batch()
            return state["batch"] is not None or self.exhausted

        self.backoff.wait(ready, timeout, "batcher")
        if state["batch"] is not None:
            return state["batch"]
        if self._out is not None and self._fill > 0:
            return self._emit(self._fill)
        raise ChannelClosed("all routes closed and drained")

    def __iter__(self) -> Batcher:
        return self

    def __next__(self) -> dict[str, torch.Tensor]:
        try:
            return self.next_batch()
        except ChannelClosed:
            raise StopIteration from None
