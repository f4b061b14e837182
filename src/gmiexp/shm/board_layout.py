"""The byte layout of a weight board's segment (:class:`~gmiexp.rl.experience.weights.WeightBoard`).

A header of 8-byte words, then two slots of ``nbytes`` each (the state the readers use, the one being written).
Torch-free, so the planner sizes ``/dev/shm`` from the layout the boards are created with
(:mod:`gmiexp.planner.resources`) without importing what runs them.
"""

from __future__ import annotations

MAGIC = 0x474D495745494748  # "GMIWEIGH"
HDR = 64  # bytes
W_MAGIC, W_VERSION, W_WRITING, W_NBYTES = 0, 1, 2, 3  # 8-byte words of the header
SLOTS = 2


def slot_offset(i: int, nbytes: int) -> int:
    """Where slot ``i`` (0 or 1) of a board of ``nbytes`` states starts in the segment."""
    return HDR + i * nbytes


def board_bytes(nbytes: int) -> int:
    """The segment's size: the header and two slots of ``nbytes`` (a model's packed ``state_dict``)."""
    return slot_offset(SLOTS, nbytes)
