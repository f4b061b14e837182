"""Single-producer/single-consumer slot ring in one shared-memory segment.

Only counters cross processes: the producer copies a payload into the next free slot, writes the
slot header (sequence number, dtype, shape, tag, first row) and then advances ``head``; the
consumer reads ``head``, takes a zero-copy tensor view of the slot and advances ``tail`` when it
releases it. No pickling, no file descriptor per tensor, memory bounded by ``n_slots * slot_bytes``.

Ordering relies on x86-64's total store order (data stores become visible before the counter
store, loads are not reordered with loads); CPython performs the stores in program order.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

import numpy as np
import torch

from gmiexp.config.enums import OnFull
from gmiexp.errors import invalid
from gmiexp.shm import segment
from gmiexp.shm.names import segment_name
from gmiexp.shm.ring_layout import (
    HDR,
    MAGIC,
    MAX_NDIM,
    SLOT_HDR,
    W_CLOSED,
    W_CONS,
    W_DROPPED,
    W_HEAD,
    W_MAGIC,
    W_NSLOTS,
    W_PROD,
    W_SLOTB,
    W_TAIL,
    ring_bytes,
    slot_stride,
)
from gmiexp.shm.wait import Backoff, PeerDied

DTYPES: tuple[torch.dtype, ...] = (
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.bool,
)
_DTYPE_CODE = {d: i for i, d in enumerate(DTYPES)}


class ChannelClosed(EOFError):
    """The producer closed the ring and every item was consumed."""


@dataclass(frozen=True)
class RingSpec:
    """What a process needs to attach: the segment name (sizes are read from its header)."""

    name: str


@dataclass(slots=True)
class Item:
    """One received transfer: a zero-copy view valid until the consumer releases it."""

    seq: int
    tag: int
    row0: int
    data: torch.Tensor


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    """Flat uint8 view of a contiguous CPU tensor (copies only if it is not contiguous)."""
    t = t.contiguous().reshape(-1)
    return t.view(torch.uint8) if t.dtype != torch.uint8 else t


memmove = ctypes.memmove  # raw copies between CPU addresses: ~10x less call overhead than Tensor.copy_


def cpu_source(t: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """``(contiguous tensor, address)`` of a CPU tensor to memmove from, or None for other devices.

    The returned tensor must be kept alive until the copy is done (it may be a contiguous copy).
    """
    if not t.is_cpu:
        return None
    if not t.is_contiguous():
        t = t.contiguous()
    return t, t.data_ptr()


class SlotRing:
    """A preallocated SPSC ring of ``n_slots`` fixed-size slots. Create in one process, attach in the other.

    Either end's ``close()`` unlinks the name (the channel is point to point); mappings survive,
    so items already delivered stay readable after the producer exits or is killed.
    """

    def __init__(self, seg: segment.Segment, on_full: OnFull = OnFull.block, backoff: Backoff | None = None) -> None:
        if on_full not in tuple(OnFull):
            raise invalid("on_full", on_full, tuple(OnFull))
        self._seg = seg
        self.on_full = on_full
        self.backoff = backoff or Backoff()
        self._w = memoryview(seg.buf).cast("B").cast("Q")
        if self._w[W_MAGIC] != MAGIC:
            raise ValueError(f"segment {seg.name} is not a gmiexp ring")
        self.n_slots = int(self._w[W_NSLOTS])
        self.slot_bytes = int(self._w[W_SLOTB])
        self._stride = slot_stride(self.slot_bytes)
        whole = torch.frombuffer(seg.buf, dtype=torch.uint8)
        self._data = [
            whole[self._off(i) + SLOT_HDR : self._off(i) + SLOT_HDR + self.slot_bytes] for i in range(self.n_slots)
        ]
        self._hdr = [
            np.frombuffer(seg.buf, dtype=np.uint64, count=SLOT_HDR // 8, offset=self._off(i))
            for i in range(self.n_slots)
        ]
        # hot path: slot header i is self._w[self._hw[i] + k]; slot data starts at address self._addr[i]
        self._hw = [self._off(i) // 8 for i in range(self.n_slots)]
        self._addr = [d.data_ptr() for d in self._data]
        self._views: list[tuple | None] = [None] * self.n_slots  # consumer: (nbytes, dtype code, shape, view)
        self._seq = 0  # producer: attempts so far (gaps seen by the consumer = drops)
        self._rd = int(self._w[W_TAIL])  # consumer: next item to hand out
        self._reserved = False

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        name: str,
        n_slots: int,
        slot_bytes: int,
        tag: str | None = None,
        on_full: OnFull = OnFull.block,
        backoff: Backoff | None = None,
    ) -> SlotRing:
        """Create a ring segment ``gmiexp_<tag>_<name>_*`` (mode 0600)."""
        if n_slots < 1:
            raise invalid("n_slots", n_slots, ">= 1")
        if slot_bytes < 1:
            raise invalid("slot_bytes", slot_bytes, ">= 1")
        if on_full not in tuple(OnFull):
            raise invalid("on_full", on_full, tuple(OnFull))
        seg = segment.create(segment_name(name, tag), ring_bytes(n_slots, slot_bytes))
        w = memoryview(seg.buf).cast("B").cast("Q")
        w[W_NSLOTS], w[W_SLOTB], w[W_MAGIC] = n_slots, slot_bytes, MAGIC
        w.release()
        return cls(seg, on_full, backoff)

    @classmethod
    def attach(
        cls, spec: RingSpec, on_full: OnFull = OnFull.block, backoff: Backoff | None = None, seal: bool = False
    ) -> SlotRing:
        """Attach by name; ``seal=True`` unlinks the name at once (no leftover even after a SIGKILL)."""
        ring = cls(segment.attach(spec.name), on_full, backoff)
        if seal:
            ring.seal()
        return ring

    @property
    def spec(self) -> RingSpec:
        return RingSpec(self._seg.name)

    def __reduce__(self) -> tuple:
        return (_attach_for_pickle, (self.spec, self.on_full, self.backoff))

    def seal(self) -> None:
        """Remove the name now that both ends have mapped it."""
        self._seg.unlink()

    def close(self) -> None:
        """Mark the producer side closed (if we produced), unlink the name, unmap when views are gone."""
        if self._w[W_PROD] == os.getpid():
            self._w[W_CLOSED] = 1
        self._seg.unlink()
        self._hdr.clear()
        self._data.clear()
        self._addr.clear()
        self._views.clear()
        self._w.release()
        self._seg.close()

    # ---- shared state ---------------------------------------------------------------------
    def _off(self, i: int) -> int:
        return HDR + i * self._stride

    @property
    def head(self) -> int:
        return int(self._w[W_HEAD])

    @property
    def tail(self) -> int:
        return int(self._w[W_TAIL])

    @property
    def dropped(self) -> int:
        """Items dropped by a producer in ``on_full='drop'`` mode."""
        return int(self._w[W_DROPPED])

    @property
    def occupancy(self) -> int:
        """Items published but not yet released: the load signal the Migrator reads."""
        return self._w[W_HEAD] - self._w[W_TAIL]

    @property
    def closed(self) -> bool:
        return bool(self._w[W_CLOSED])

    # ---- producer ---------------------------------------------------------------------------
    def _bind(self, word: int) -> None:
        pid = os.getpid()
        if self._w[word] != pid:
            self._w[word] = pid

    def _reserve_index(self, timeout: float | None = None) -> int:
        """Index of the next free slot (waits when full in block mode); -1 if dropped (drop mode, counted)."""
        w, n = self._w, self.n_slots
        self._bind(W_PROD)
        head = w[W_HEAD]
        if head - w[W_TAIL] >= n:
            if self.on_full == "drop":
                self._seq += 1
                w[W_DROPPED] += 1
                return -1
            self.backoff.wait(lambda: w[W_HEAD] - w[W_TAIL] < n, timeout, "ring full", peer=lambda: int(w[W_CONS]))
        self._reserved = True
        return head % n

    def reserve(self, timeout: float | None = None) -> torch.Tensor | None:
        """Writable uint8 view of the next free slot; None if full in drop mode (counted)."""
        i = self._reserve_index(timeout)
        return None if i < 0 else self._data[i]

    def commit(self, nbytes: int, dtype: torch.dtype, shape: tuple[int, ...], tag: int = 0, row0: int = 0) -> int:
        """Publish the reserved slot holding ``nbytes`` of a ``dtype``/``shape`` tensor; returns its seq."""
        if not self._reserved:
            raise RuntimeError("commit() without reserve()")
        ndim = len(shape)
        if ndim > MAX_NDIM:
            raise invalid("tensor rank", ndim, f"<= {MAX_NDIM}")
        w = self._w
        head = w[W_HEAD]
        b = self._hw[head % self.n_slots]
        seq = self._seq
        w[b], w[b + 1], w[b + 2], w[b + 3] = nbytes, seq, _DTYPE_CODE[dtype], ndim
        for k in range(ndim):
            w[b + 4 + k] = shape[k]
        w[b + 12], w[b + 13] = tag, row0
        w[W_HEAD] = head + 1  # publish after the data and header stores
        self._seq = seq + 1
        self._reserved = False
        return seq

    def put(self, t: torch.Tensor, tag: int = 0, row0: int = 0, timeout: float | None = None) -> bool:
        """Copy ``t`` into a slot and publish it. False if dropped (drop mode, ring full)."""
        nbytes = t.numel() * t.element_size()
        if nbytes > self.slot_bytes:
            raise invalid("item size (bytes)", nbytes, f"<= slot_bytes={self.slot_bytes}")
        shape = tuple(t.shape)
        src = cpu_source(t)
        i = self._reserve_index(timeout)
        if i < 0:
            return False
        if src is not None:
            memmove(self._addr[i], src[1], nbytes)
        else:  # e.g. a CUDA tensor: one device-to-host copy straight into the slot
            self._data[i][:nbytes].copy_(as_bytes(t))
        self.commit(nbytes, t.dtype, shape, tag, row0)
        return True

    def close_writer(self) -> None:
        """Tell the consumer no more items will come (it sees ChannelClosed once drained)."""
        self._w[W_CLOSED] = 1

    # ---- consumer ---------------------------------------------------------------------------
    def poll(self) -> bool:
        """True if an item is ready to receive."""
        return self._w[W_HEAD] > self._rd

    def recv(self, timeout: float | None = None) -> Item:
        """Next item as a zero-copy view; raises ChannelClosed at end of stream, TimeoutError, PeerDied.

        The view may be the same tensor object as an earlier item's from that slot (views are cached
        per slot): read or write its elements, but do not change its metadata in place (``resize_``).
        """
        self._bind(W_CONS)
        w, rd = self._w, self._rd
        if w[W_HEAD] <= rd:
            try:
                self.backoff.wait(
                    lambda: w[W_HEAD] > rd or w[W_CLOSED], timeout, "ring empty", peer=lambda: int(w[W_PROD])
                )
            except PeerDied:
                raise PeerDied(f"producer of {self._seg.name} died; {rd} items received") from None
            if w[W_HEAD] <= rd:
                raise ChannelClosed(self._seg.name)
        i = rd % self.n_slots
        b = self._hw[i]
        hdr = w[b : b + 4 + w[b + 3]].tolist()  # nbytes, seq, dtype code, ndim, shape...
        nbytes, code, shape = hdr[0], hdr[2], hdr[4:]
        cached = self._views[i]  # transfers of one channel mostly repeat their shape: reuse the view
        if cached is not None and cached[0] == nbytes and cached[1] == code and cached[2] == shape:
            data = cached[3]
        else:
            data = self._data[i][:nbytes].view(DTYPES[code]).view(shape)
            self._views[i] = (nbytes, code, shape, data)
        self._rd = rd + 1
        return Item(hdr[1], w[b + 12], w[b + 13], data)

    def release(self, n: int = 1) -> None:
        """Give the ``n`` oldest received slots back to the producer (their views become invalid)."""
        tail = self._w[W_TAIL]
        if tail + n > self._rd:
            raise RuntimeError(f"release({n}) but only {self._rd - tail} items held")
        self._w[W_TAIL] = tail + n

    def recv_copy(self, timeout: float | None = None) -> Item:
        """Receive, clone out of the slot and release it at once."""
        item = self.recv(timeout)
        item.data = item.data.clone()
        self.release()
        return item


def _attach_for_pickle(spec: RingSpec, on_full: OnFull, backoff: Backoff) -> SlotRing:
    return SlotRing.attach(spec, on_full, backoff)
