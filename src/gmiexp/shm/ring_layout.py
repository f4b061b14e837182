"""The byte layout of a slot ring's segment (:class:`~gmiexp.comm.channels.ring.SlotRing`), and rows per transfer.

A header of config words and counters, then ``n_slots`` slots, each a slot header and ``slot_bytes`` of payload
rounded up to a cache line. Torch-free, so the planner sizes ``/dev/shm`` from the layout the rings are created
with (:mod:`gmiexp.planner.resources`) without importing what runs them.
"""

from __future__ import annotations

MAGIC = 0x474D4952494E4731  # "GMIRING1"
HDR = 256  # bytes: config words, then head / tail / dropped on their own cache lines
W_MAGIC, W_NSLOTS, W_SLOTB, W_PROD, W_CONS, W_CLOSED = 0, 1, 2, 3, 4, 5  # 8-byte words of the header
W_HEAD, W_TAIL, W_DROPPED = 8, 16, 24
SLOT_HDR = 128  # bytes: nbytes, seq, dtype, ndim, shape[8], tag, row0
MAX_NDIM = 8
ALIGN = 64


def slot_stride(slot_bytes: int) -> int:
    """Bytes from one slot's header to the next's (slot ``i``'s header is at ``HDR + i * stride``)."""
    return (SLOT_HDR + slot_bytes + ALIGN - 1) // ALIGN * ALIGN


def ring_bytes(n_slots: int, slot_bytes: int) -> int:
    """The segment's size: the header and ``n_slots`` slots of ``slot_bytes`` payload."""
    return HDR + n_slots * slot_stride(slot_bytes)


def aligned_rows(rows: int, batch_rows: int | None) -> int:
    """Rows per transfer (a slot's payload): at most ``rows``, a multiple or divisor of ``batch_rows`` when one is near.

    A batch that straddles two transfers must be stitched by a copy; with aligned transfers each
    batch lies inside one transfer (a zero-copy view) or is exactly a whole number of them. Only
    a divisor that keeps transfers at least half as large as ``rows`` is used: smaller transfers
    would cost more per byte than the copy they save.
    """
    if not batch_rows or batch_rows < 1:
        return rows
    if rows >= batch_rows:
        return rows // batch_rows * batch_rows
    for k in range(2, batch_rows + 1):  # the largest divisor of batch_rows that fits
        if batch_rows % k == 0 and batch_rows // k <= rows:
            return batch_rows // k if batch_rows // k * 2 >= rows else rows
    return rows
