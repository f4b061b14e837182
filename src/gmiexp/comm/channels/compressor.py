"""Compressor: concatenates many small pieces of one channel into ring transfers of ``target_bytes``.

Pieces are written straight into the reserved slot (no intermediate buffer, one ``memmove`` per
piece from CPU memory); a piece larger than the room left is split along rows, so a transfer is
never larger than ``target_bytes``. A piece that fills a whole transfer is one copy into its slot.
"""

from __future__ import annotations

import torch

from gmiexp.comm.channels.fields import FieldSpec
from gmiexp.comm.channels.ring import SlotRing, as_bytes, cpu_source, memmove
from gmiexp.errors import invalid


class Compressor:
    """Row-packing writer for one field's ring. ``row`` counts rows sent (the next transfer's row0)."""

    def __init__(self, ring: SlotRing, field: FieldSpec, target_bytes: int | None = None) -> None:
        target = target_bytes or ring.slot_bytes
        if not field.row_bytes <= target <= ring.slot_bytes:
            raise invalid(f"target_bytes of channel {field.name!r}", target, f"{field.row_bytes}..{ring.slot_bytes}")
        self.ring, self.field = ring, field
        self.rows_per_transfer = target // field.row_bytes
        self.row = 0
        self.dropped_rows = 0
        self._slot: torch.Tensor | None = None
        self._addr = 0  # address of the reserved slot's data
        self._fill = 0  # rows in the reserved slot
        self._row0 = 0
        self._shape = field.shape
        self._transfer_shape = (self.rows_per_transfer, *field.shape)

    def push(self, rows: torch.Tensor) -> None:
        """Append ``rows`` (shape ``(k, *field.shape)``), flushing each time a transfer is full."""
        k = rows.shape[0]
        src = cpu_source(rows)
        if src is None:  # not in host memory: torch copies (device -> shared host memory)
            self._push_tensor(as_bytes(rows), k)
        else:
            self._push_ptr(src[1], k)

    def _push_ptr(self, ptr: int, k: int) -> None:
        """Append ``k`` rows that lie contiguously at host address ``ptr`` (kept alive by the caller)."""
        rb, per, done = self.field.row_bytes, self.rows_per_transfer, 0
        while done < k:
            if self._slot is None and not self._open():
                take = min(k - done, per)
                self.dropped_rows += take
                self.row += take
                done += take
                continue
            fill = self._fill
            take = min(k - done, per - fill)
            memmove(self._addr + fill * rb, ptr + done * rb, take * rb)
            self._fill = fill + take
            self.row += take
            done += take
            if self._fill == per:
                self.flush()

    def _push_tensor(self, src: torch.Tensor, k: int) -> None:
        rb, done = self.field.row_bytes, 0
        while done < k:
            if self._slot is None and not self._open():
                take = min(k - done, self.rows_per_transfer)
                self.dropped_rows += take
                self.row += take
                done += take
                continue
            take = min(k - done, self.rows_per_transfer - self._fill)
            self._slot[self._fill * rb : (self._fill + take) * rb].copy_(src[done * rb : (done + take) * rb])
            self._fill += take
            self.row += take
            done += take
            if self._fill == self.rows_per_transfer:
                self.flush()

    def _open(self) -> bool:
        ring = self.ring
        i = ring._reserve_index()
        self._fill, self._row0 = 0, self.row
        if i < 0:
            self._slot = None
            return False
        self._slot, self._addr = ring._data[i], ring._addr[i]
        return True

    def flush(self) -> None:
        """Publish the partly filled transfer, if any."""
        if self._slot is None or self._fill == 0:
            return
        f, fill = self.field, self._fill
        shape = self._transfer_shape if fill == self.rows_per_transfer else (fill, *self._shape)
        self.ring.commit(fill * f.row_bytes, f.dtype, shape, row0=self._row0)
        self._slot = None
        self._fill = 0
