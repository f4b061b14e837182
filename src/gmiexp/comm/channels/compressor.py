"""Compressor: concatenates many small pieces of one channel into ring transfers of ``target_bytes``.

Pieces are written straight into the reserved slot (no intermediate buffer); a piece larger than
the room left is split along rows, so a transfer is never larger than ``target_bytes``.
"""

from __future__ import annotations

import torch

from gmiexp.comm.channels.fields import FieldSpec
from gmiexp.comm.channels.ring import SlotRing, as_bytes
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
        self._fill = 0  # rows in the reserved slot
        self._row0 = 0

    def push(self, rows: torch.Tensor) -> None:
        """Append ``rows`` (shape ``(k, *field.shape)``), flushing each time a transfer is full."""
        src = as_bytes(rows)
        rb, k, done = self.field.row_bytes, rows.shape[0], 0
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
        self._slot = self.ring.reserve()
        self._fill, self._row0 = 0, self.row
        return self._slot is not None

    def flush(self) -> None:
        """Publish the partly filled transfer, if any."""
        if self._slot is None or self._fill == 0:
            return
        f = self.field
        self.ring.commit(self._fill * f.row_bytes, f.dtype, (self._fill, *f.shape), row0=self._row0)
        self._slot = None
        self._fill = 0
