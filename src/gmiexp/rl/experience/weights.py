"""Weights published by trainers through shared memory: a double-buffered, versioned board.

The trainer writes a model's ``state_dict`` (parameters and normalisers, as raw bytes) into the
slot the readers are not using and then bumps ``version``; agents copy the newest slot out without
any message or lock. A reader retries when the writer lapped it during the copy (seqlock: the
``writing`` word is bumped before a slot is overwritten, ``version`` after). Ordering relies on
x86-64 total store order, as the channel rings do.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from gmiexp.shm import segment
from gmiexp.shm.board_layout import (
    MAGIC,
    SLOTS,
    W_MAGIC,
    W_NBYTES,
    W_VERSION,
    W_WRITING,
    board_bytes,
    slot_offset,
)
from gmiexp.shm.names import segment_name
from gmiexp.shm.wait import Backoff

_WAIT = Backoff(spin=0, spin_s=0, min_sleep_s=1e-5, max_sleep_s=2e-3, check_s=0)  # agents wait for a trainer


def state_nbytes(model: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in model.state_dict().values() if torch.is_tensor(t))


def pack_state(model: nn.Module, out: torch.Tensor) -> torch.Tensor:
    """Copy every tensor of ``model.state_dict()`` into the uint8 buffer ``out``, in order."""
    off = 0
    for t in model.state_dict().values():
        if torch.is_tensor(t):
            b = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
            out[off:off + b.numel()].copy_(b)
            off += b.numel()
    return out[:off]


def unpack_state(model: nn.Module, blob: torch.Tensor) -> None:
    """Load bytes written by :func:`pack_state` into ``model`` in place."""
    off = 0
    with torch.no_grad():
        for t in model.state_dict().values():
            if torch.is_tensor(t):
                n = t.numel() * t.element_size()
                src = blob[off:off + n].view(t.dtype).view(t.shape)
                t.copy_(src)
                off += n


class WeightBoard:
    """One writer (a trainer GMI), any number of readers (agent GMIs)."""

    def __init__(self, seg: segment.Segment) -> None:
        self._seg = seg
        self._w = memoryview(seg.buf).cast("B").cast("Q")
        if self._w[W_MAGIC] != MAGIC:
            raise ValueError(f"segment {seg.name} is not a gmiexp weight board")
        self.nbytes = int(self._w[W_NBYTES])
        whole = torch.frombuffer(seg.buf, dtype=torch.uint8)
        self._slots = [whole[slot_offset(i, self.nbytes):slot_offset(i + 1, self.nbytes)] for i in range(SLOTS)]

    @classmethod
    def create(cls, name: str, nbytes: int, tag: str | None = None) -> WeightBoard:
        seg = segment.create(segment_name(name, tag), board_bytes(nbytes))
        w = memoryview(seg.buf).cast("B").cast("Q")
        w[W_NBYTES], w[W_MAGIC] = nbytes, MAGIC
        w.release()
        return cls(seg)

    @classmethod
    def attach(cls, name: str) -> WeightBoard:
        return cls(segment.attach(name))

    def __reduce__(self) -> tuple:
        return (WeightBoard.attach, (self.name,))

    @property
    def name(self) -> str:
        return self._seg.name

    @property
    def version(self) -> int:
        """Versions published so far (0 = nothing yet)."""
        return int(self._w[W_VERSION])

    def seal(self) -> None:
        """Unlink the name once every reader has attached (nothing left behind even after a crash)."""
        self._seg.unlink()

    def publish(self, model: nn.Module) -> int:
        """Write ``model``'s state into the idle slot and make it the newest version."""
        v = self.version + 1
        self._w[W_WRITING] = v
        pack_state(model, self._slots[v % 2])
        self._w[W_VERSION] = v
        return v

    def read(self, model: nn.Module, scratch: torch.Tensor) -> int:
        """Load the newest version into ``model`` (``scratch``: a uint8 buffer of ``nbytes``); returns it."""
        while True:
            v = self.version
            if v == 0:
                return 0
            scratch.copy_(self._slots[v % 2])
            if int(self._w[W_WRITING]) <= v + 1:  # the writer has not started overwriting slot v % 2
                unpack_state(model, scratch)
                return v

    def wait(self, at_least: int, timeout_s: float, beat: Callable[[], None] | None = None) -> int:
        """Block until ``version >= at_least``; TimeoutError after ``timeout_s``; ``beat`` runs while waiting."""
        try:
            _WAIT.wait(lambda: self.version >= at_least, timeout_s, check=beat)
        except TimeoutError:
            raise TimeoutError(f"no weights version {at_least} after {timeout_s} s (have {self.version})") from None
        return self.version

    def close(self) -> None:
        if self._seg.owner:
            self._seg.unlink()
        self._slots.clear()
        self._w.release()
