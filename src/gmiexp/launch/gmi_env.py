"""Apply a GMI's environment in its own process, before anything initialises CUDA."""

from __future__ import annotations

import os

from gmiexp.plan import GMI


def apply_gmi_environment(gmi: GMI) -> None:
    """Environment variables (CUDA_VISIBLE_DEVICES, MPS shares, thread caps) and core affinity."""
    os.environ.update(gmi.env)
    if gmi.cpus:
        os.sched_setaffinity(0, set(gmi.cpus))
