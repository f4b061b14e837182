"""What both trainers do with a model's state: copy it to the host, and hash it to see GMIs are in sync.

One home for rl-games' and rsl_rl's GMIs (checkpoints, run state, the ``sync/digest`` of history rows, the
experience trainers' weight checks).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn


def to_host(obj: Any) -> Any:
    """``obj`` with every tensor inside (dicts, lists, tuples) detached and copied to the host.

    A stand-in device's storage (``lazy``) cannot be pickled, and a checkpoint must load on any device.
    """
    if torch.is_tensor(obj):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: to_host(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(to_host(v) for v in obj)
    return obj


def state_digest(*states: Mapping[str, Any]) -> str:
    """A hash of the exact bytes of every tensor of the ``state_dict`` s, names and order included."""
    h = hashlib.sha1()
    for state in states:
        for name, t in state.items():
            if torch.is_tensor(t):
                h.update(name.encode())
                h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def model_digest(*models: nn.Module) -> str:
    """:func:`state_digest` of ``models``' parameters and buffers (normalisers included): equal on GMIs in sync."""
    return state_digest(*(m.state_dict() for m in models))


__all__ = ["model_digest", "state_digest", "to_host"]
