"""Apply a GMI's environment in its own process, before anything initialises CUDA."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from gmiexp.plan import GMI


def apply_gmi_environment(gmi: GMI) -> None:
    """Environment variables (CUDA_VISIBLE_DEVICES, MPS shares, thread caps) and core affinity."""
    os.environ.update(gmi.env)
    if gmi.cpus:
        os.sched_setaffinity(0, set(gmi.cpus))


@contextmanager
def gmi_environment(gmi: GMI) -> Iterator[None]:
    """The GMI's environment and cores in this process for a while (an in-process run), then the process's again.

    Left in place, a GMI's ``CUDA_VISIBLE_DEVICES`` (one GPU's UUID, or empty on CPU) would bound every later
    run's GPUs in the same process (:func:`gmiexp.hardware.visible`) and pass to every process it starts.
    """
    saved = {k: os.environ.get(k) for k in gmi.env}
    cores = os.sched_getaffinity(0)
    apply_gmi_environment(gmi)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        os.sched_setaffinity(0, cores)
