"""What the lazy stand-in device (``train.device=lazy``) holds back: pending graphs and compiles.

Deterministic measures of a graph that is never cut (``gmiexp.device.step_boundary``): a tensor that
keeps its history carries more pending IR nodes after every update, and every update then compiles a
new, longer graph. Both grow without bound where the time and memory they cost drift with the host.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch._lazy.debug
import torch._lazy.metrics


def pending_ops(tensors: Iterable[object]) -> int:
    """IR nodes the lazy device has yet to run for the lazy ``tensors`` (0: each holds plain data)."""
    lazy = [t for t in tensors if isinstance(t, torch.Tensor) and t.device.type == "lazy"]
    if not lazy:
        return 0
    text = torch._lazy.debug.dump_ir(lazy, "text")
    return sum(1 for line in text.splitlines() if line.strip().startswith("%") and "device_data" not in line)


def compiles() -> int:
    """Graphs the lazy backend has compiled in this process (a graph met again is taken from its cache)."""
    return int(torch._lazy.metrics.counter_value("UncachedCompile") or 0)


__all__ = ["compiles", "pending_ops"]
