"""ExperienceStore: GEAR-style column tables + index manager in shared memory.

Writers ``allocate`` rows, fill the zero-copy block views in place and ``commit``; readers
``sample`` indices with a selection strategy and ``gather`` (one copy) or ``view`` (zero copy)
them. Any process attaches by unpickling the store (only segment names travel).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from gmiexp.comm.channels.fields import FieldSpec, check_names, field_specs
from gmiexp.comm.store.index import EVICTIONS, Eviction, IndexManager
from gmiexp.comm.store.selection import selector
from gmiexp.comm.store.table import ColumnTable
from gmiexp.errors import invalid
from gmiexp.shm import segment
from gmiexp.shm.names import segment_name


@dataclass
class WriteBuffer:
    """Rows reserved by ``allocate``: ``views[field][j]`` is row ``indices[j]`` in place."""

    indices: torch.Tensor
    tables: Mapping[str, ColumnTable]

    def row(self, field: str, j: int) -> torch.Tensor:
        return self.tables[field].data[int(self.indices[j])]

    def write(self, rows: Mapping[str, torch.Tensor]) -> None:
        """Scatter ``rows[field][j]`` into row ``indices[j]`` of each table."""
        for name, x in rows.items():
            t = self.tables[name]
            t.data.index_copy_(0, self.indices, x.to(t.field.dtype).reshape(len(self.indices), *t.field.shape))


class ExperienceStore:
    """Fixed-capacity rows of several fields; eviction FIFO or LIFO when full."""

    def __init__(self, fields: Sequence[FieldSpec], tables: dict[str, ColumnTable], index: IndexManager) -> None:
        self.fields, self.tables, self.index = list(fields), tables, index
        self.capacity = index.capacity

    @classmethod
    def create(
        cls,
        fields: Sequence[FieldSpec] | Mapping[str, tuple[tuple[int, ...], torch.dtype]],
        capacity: int,
        eviction: Eviction = "fifo",
        name: str = "store",
        tag: str | None = None,
    ) -> ExperienceStore:
        if capacity < 1:
            raise invalid("store capacity", capacity, ">= 1")
        if eviction not in EVICTIONS:
            raise invalid("eviction", eviction, EVICTIONS)
        specs = field_specs(fields)
        tables = {f.name: ColumnTable.create(f, capacity, name, tag) for f in specs}
        seg = segment.create(segment_name(f"{name}-index", tag), IndexManager.nbytes(capacity))
        return cls(specs, tables, IndexManager(seg, capacity, eviction))

    def __reduce__(self) -> tuple:
        names = {k: t.seg.name for k, t in self.tables.items()}
        return (_attach, (self.fields, names, self.index.seg.name, self.capacity, self.index.eviction))

    def _check_batch(self, k: int) -> None:
        if not 1 <= k <= self.capacity:
            raise invalid("batch size", k, f"1..{self.capacity} (the store capacity)")

    def _check_fields(self, names: Sequence[str]) -> None:
        check_names(names, self.fields, "store field")

    # writing
    def allocate(self, n: int) -> WriteBuffer:
        self._check_batch(n)
        return WriteBuffer(self.index.allocate(n), self.tables)

    def commit(self, buf: WriteBuffer, priority: torch.Tensor | float = 1.0) -> None:
        self.index.commit(buf.indices, priority)

    def insert(self, rows: Mapping[str, torch.Tensor], priority: torch.Tensor | float = 1.0) -> torch.Tensor:
        """Allocate, write and commit ``rows`` (every field, same row count); returns their indices."""
        self._check_fields(list(rows))
        missing = [f.name for f in self.fields if f.name not in rows]
        if missing:
            raise invalid("rows to insert", sorted(rows), [f.name for f in self.fields], f"missing {missing}")
        n = next(iter(rows.values())).shape[0]
        buf = self.allocate(n)
        buf.write(rows)
        self.commit(buf, priority)
        return buf.indices

    # reading
    def sample(self, k: int, strategy: str = "uniform", generator: torch.Generator | None = None) -> torch.Tensor:
        """Indices of ``k`` ready rows chosen by ``strategy`` (uniform, prioritized, topk, fifo, lifo)."""
        self._check_batch(k)
        pick = selector(strategy)
        with self.index.locked():
            ready = self.index.ready()
            return pick(ready, self.index.stamp, self.index.priority, k, generator)

    def gather(self, idx: torch.Tensor, fields: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
        """Copy the rows ``idx`` of each field into a batch."""
        names = list(fields) if fields is not None else [f.name for f in self.fields]
        self._check_fields(names)
        return {n: self.tables[n].data.index_select(0, idx) for n in names}

    def view(self, field: str, i: int) -> torch.Tensor:
        """Zero-copy view of one block."""
        self._check_fields([field])
        return self.tables[field].data[i]

    def release(self, idx: torch.Tensor) -> None:
        self.index.release(idx)

    def update_priorities(self, idx: torch.Tensor, priority: torch.Tensor | float) -> None:
        with self.index.locked():
            self.index.priority[idx] = torch.as_tensor(priority, dtype=torch.float64)

    @property
    def size(self) -> int:
        return int(self.index.ready().numel())

    def unlink(self) -> None:
        """Drop the names once every client has attached (nothing can leak after that)."""
        for t in self.tables.values():
            t.seg.unlink()
        self.index.seg.unlink()

    def close(self) -> None:
        for t in self.tables.values():
            t.close()
        self.index.close()


def _attach(
    fields: list[FieldSpec], names: dict[str, str], index_name: str, capacity: int, eviction: Eviction
) -> ExperienceStore:
    tables = {f.name: ColumnTable.attach(f, names[f.name], capacity) for f in fields}
    return ExperienceStore(fields, tables, IndexManager(segment.attach(index_name), capacity, eviction))
