"""Channel sets: the rings from one agent to one trainer.

In ``multi`` mode (one ring per field,
Compressor-packed transfers: the paper's design) or ``uni`` mode (every tensor of every step
sent on its own through one generic ring: the paper's uni-channel baseline).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from gmiexp.comm.channels.compressor import Compressor
from gmiexp.comm.channels.fields import FieldSpec, check_names, field_specs
from gmiexp.comm.channels.ring import RingSpec, SlotRing, memmove
from gmiexp.comm.channels.sources import RingRowSource, UniDemux, UniRowSource
from gmiexp.config.enums import ChannelMode, OnFull
from gmiexp.errors import invalid
from gmiexp.shm.ring_layout import aligned_rows

RowSource = RingRowSource | UniRowSource


class MultiChannelSet:
    """One ring per field; all fields share ``rows_per_transfer`` so transfers stay row-aligned."""

    mode = ChannelMode.multi

    def __init__(self, fields: Sequence[FieldSpec], rings: Sequence[SlotRing]) -> None:
        self.fields, self.rings = list(fields), list(rings)
        self._compressors: list[Compressor] | None = None

    @classmethod
    def create(
        cls,
        fields: Sequence[FieldSpec],
        rows_per_transfer: int,
        n_slots: int,
        name: str,
        tag: str | None,
        on_full: OnFull,
    ) -> MultiChannelSet:
        rings = [
            SlotRing.create(f"{name}-{f.name}", n_slots, rows_per_transfer * f.row_bytes, tag, on_full) for f in fields
        ]
        return cls(fields, rings)

    def __reduce__(self) -> tuple:
        return (_attach, (ChannelMode.multi, self.fields, [r.spec for r in self.rings], self.rings[0].on_full))

    # producer side
    def send(self, exp: Mapping[str, torch.Tensor]) -> None:
        """Push each field's rows (``exp[f]`` shaped ``(T, N, *shape)``) into its Compressor."""
        comps = self._compressors
        if comps is None:
            comps = self._compressors = [Compressor(r, f) for r, f in zip(self.rings, self.fields, strict=True)]
            self._plan = [(c.field.name, c, c.field.row_bytes, math.prod(c.field.shape)) for c in comps]
        # host tensors (the common case): one memmove per field and transfer, no tensor slicing
        srcs: list[tuple[Compressor, int, int]] | None = []
        n = -1
        for name, c, rb, per_row in self._plan:
            x = exp[name]
            if not (x.is_cpu and per_row and x.is_contiguous()):
                srcs = None
                break
            k = x.numel() // per_row
            if k != n and n >= 0:
                srcs = None  # row counts differ (not via a Dispenser): the slicing path below clips as before
                break
            n = k
            srcs.append((c, rb, x.data_ptr()))  # x stays alive in exp while we copy
        if srcs is not None:
            c0 = comps[0]
            fill = c0._fill
            if c0._slot is not None and fill + n < c0.rows_per_transfer:
                # every field has the same transfer open with room for all rows (lockstep, no drops)
                if all(c._slot is not None and c._fill == fill for c, _, _ in srcs):
                    for c, rb, ptr in srcs:
                        memmove(c._addr + fill * rb, ptr, n * rb)
                        c._fill = fill + n
                        c.row += n
                    return
            step = c0.rows_per_transfer
            # fields advance in lockstep, one transfer at a time: blocking on a full ring of one field
            # while the others hold nothing would starve a consumer that needs every field of a row
            for start in range(0, n, step):
                take = min(step, n - start)
                for c, rb, ptr in srcs:
                    c._push_ptr(ptr + start * rb, take)
            return
        xs = [exp[c.field.name].reshape(-1, *c.field.shape) for c in comps]
        step = comps[0].rows_per_transfer
        for start in range(0, xs[0].shape[0], step):
            for c, x in zip(comps, xs, strict=True):
                c.push(x[start : start + step])

    def flush(self) -> None:
        for c in self._compressors or ():
            c.flush()

    def close_writer(self) -> None:
        self.flush()
        for r in self.rings:
            r.close_writer()

    @property
    def dropped_rows(self) -> int:
        return max((c.dropped_rows for c in self._compressors or ()), default=0)

    # consumer side
    def sources(self) -> list[RowSource]:
        return [RingRowSource(r) for r in self.rings]

    @property
    def load(self) -> float:
        """Fill fraction of the fullest ring: how far behind the consumer is."""
        return max(r.occupancy / r.n_slots for r in self.rings)

    def seal(self) -> None:
        for r in self.rings:
            r.seal()

    def close(self) -> None:
        for r in self.rings:
            r.close()


class UniChannelSet:
    """One generic ring; each step's tensor of each field is its own transfer (tag = field index)."""

    mode = ChannelMode.uni

    def __init__(self, fields: Sequence[FieldSpec], ring: SlotRing) -> None:
        self.fields, self.rings = list(fields), [ring]
        self.ring = ring
        self._row = 0

    @classmethod
    def create(
        cls,
        fields: Sequence[FieldSpec],
        rows_per_step: int,
        n_slots: int,
        name: str,
        tag: str | None,
        on_full: OnFull,
    ) -> UniChannelSet:
        slot = rows_per_step * max(f.row_bytes for f in fields)
        return cls(fields, SlotRing.create(f"{name}-uni", n_slots, slot, tag, on_full))

    def __reduce__(self) -> tuple:
        return (_attach, (ChannelMode.uni, self.fields, [self.ring.spec], self.ring.on_full))

    def send(self, exp: Mapping[str, torch.Tensor]) -> None:
        """Send ``exp[f][t]`` (``exp[f]`` shaped ``(T, N, *shape)``) for every step and field on its own."""
        xs = [exp[f.name] for f in self.fields]
        steps, per_step = xs[0].shape[:2]
        for t in range(steps):
            for i, x in enumerate(xs):
                self.ring.put(x[t], tag=i, row0=self._row)
            self._row += per_step

    def flush(self) -> None:
        """Nothing is buffered in uni mode."""

    def close_writer(self) -> None:
        self.ring.close_writer()

    @property
    def dropped_rows(self) -> int:
        return 0

    def sources(self) -> list[RowSource]:
        demux = UniDemux(self.ring, len(self.fields))
        return [UniRowSource(demux, i) for i in range(len(self.fields))]

    @property
    def load(self) -> float:
        return self.ring.occupancy / self.ring.n_slots

    def seal(self) -> None:
        self.ring.seal()

    def close(self) -> None:
        self.ring.close()


ChannelSet = MultiChannelSet | UniChannelSet


def make_channel_set(
    mode: ChannelMode | str,
    fields: Sequence[FieldSpec] | Mapping[str, tuple[tuple[int, ...], torch.dtype]],
    *,
    rows_per_step: int,
    target_bytes: int,
    n_slots: int = 8,
    name: str = "exp",
    tag: str | None = None,
    on_full: OnFull = OnFull.block,
    batch_rows: int | None = None,
) -> ChannelSet:
    """Create the rings from one agent to one trainer.

    ``rows_per_step`` is the number of environments an agent steps (rows per step and field);
    ``target_bytes`` the transfer size the Compressor aims for in ``multi`` mode (the largest
    field's transfer is at most this); ``n_slots`` bounds memory: at most ``n_slots`` transfers
    per ring are in flight before the producer blocks (or drops, with ``on_full='drop'``).
    ``batch_rows``, the trainer's batch size, aligns transfers with batches (see
    :func:`~gmiexp.shm.ring_layout.aligned_rows`) so the Batcher can hand most batches out as zero-copy views.
    """
    if mode not in tuple(ChannelMode):
        raise invalid("channel mode", mode, tuple(ChannelMode))
    specs = field_specs(fields)
    if rows_per_step < 1:
        raise invalid("rows_per_step", rows_per_step, ">= 1")
    widest = max(f.row_bytes for f in specs)
    if target_bytes < widest:
        raise invalid("target_bytes", target_bytes, f">= {widest} (one row of the widest field)")
    if mode == ChannelMode.multi:
        rows = aligned_rows(target_bytes // widest, batch_rows)
        return MultiChannelSet.create(specs, rows, n_slots, name, tag, on_full)
    return UniChannelSet.create(specs, rows_per_step, n_slots * len(specs), name, tag, on_full)


def _attach(mode: ChannelMode, fields: list[FieldSpec], specs: list[RingSpec], on_full: OnFull) -> ChannelSet:
    rings = [SlotRing.attach(s, on_full) for s in specs]
    return MultiChannelSet(fields, rings) if mode == ChannelMode.multi else UniChannelSet(fields, rings[0])


__all__ = ["ChannelSet", "MultiChannelSet", "UniChannelSet", "make_channel_set", "check_names"]
