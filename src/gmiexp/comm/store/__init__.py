"""GEAR-style experience store: column tables and an index manager in shared memory."""

from gmiexp.comm.store.index import EVICTIONS, IndexManager, StoreFull
from gmiexp.comm.store.selection import SELECTORS, NotEnoughRows
from gmiexp.comm.store.store import ExperienceStore, WriteBuffer
from gmiexp.comm.store.table import ColumnTable

__all__ = [
    "EVICTIONS",
    "SELECTORS",
    "ColumnTable",
    "ExperienceStore",
    "IndexManager",
    "NotEnoughRows",
    "StoreFull",
    "WriteBuffer",
]
