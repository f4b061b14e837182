"""Column table: one field of every stored row, contiguous in one shared-memory segment (GEAR 3.2).

Row ``i`` of every table together forms one stored experience row; a block (one row of one
field) is the unit of reads and writes, and ``data[i]`` is a zero-copy view of it.
"""

from __future__ import annotations

import torch

from gmiexp.comm.channels.fields import FieldSpec
from gmiexp.shm import segment
from gmiexp.shm.names import segment_name


class ColumnTable:
    """``capacity`` blocks of ``field.shape``/``field.dtype`` in shared memory."""

    def __init__(self, field: FieldSpec, seg: segment.Segment, capacity: int) -> None:
        self.field, self.seg, self.capacity = field, seg, capacity
        flat = torch.frombuffer(seg.buf, dtype=torch.uint8, count=capacity * field.row_bytes)
        self.data = flat.view(field.dtype).view(capacity, *field.shape)

    @classmethod
    def create(cls, field: FieldSpec, capacity: int, name: str, tag: str | None) -> ColumnTable:
        seg = segment.create(segment_name(f"{name}-{field.name}", tag), capacity * field.row_bytes)
        return cls(field, seg, capacity)

    @classmethod
    def attach(cls, field: FieldSpec, seg_name: str, capacity: int) -> ColumnTable:
        return cls(field, segment.attach(seg_name), capacity)

    def close(self) -> None:
        del self.data
        self.seg.close()
