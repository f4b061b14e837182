"""Rendezvous of the shared-memory links between GMIs (rings, weight boards).

The producer side creates each segment; only its name (a pickled handle) travels, once, through
one ``all_gather_object`` over the gloo default group; consumers attach; after a barrier every
name is unlinked (sealed), so nothing is left in ``/dev/shm`` even if a GMI is killed later.
"""

from __future__ import annotations

import pickle
from typing import Any

import torch.distributed as dist

from gmiexp.comm.manager import GMIManager


def exchange(mgr: GMIManager, mine: dict[str, Any]) -> dict[str, bytes]:
    """Publish ``{key: handle}`` (handles pickled) and receive every GMI's; collective over all GMIs."""
    blob = {k: pickle.dumps(v) for k, v in mine.items()}
    if not mgr.distributed:
        return blob
    everyone: list[dict[str, bytes] | None] = [None] * mgr.world_size
    dist.all_gather_object(everyone, blob)
    merged: dict[str, bytes] = {}
    for d in everyone:
        merged.update(d or {})
    return merged


def attach(handles: dict[str, bytes], key: str) -> Any:
    """Unpickle (= attach to) the handle published under ``key``."""
    return pickle.loads(handles[key])


def barrier(mgr: GMIManager) -> None:
    if mgr.distributed:
        dist.barrier()


def board_key(trainer: int) -> str:
    """Rendezvous key of a trainer's weight board."""
    return f"weights/{trainer}"


def route_key(agent: int, trainer: int) -> str:
    """Rendezvous key of the channel set from an agent to a trainer."""
    return f"exp/{agent}->{trainer}"
