"""Moving a running job to other cores without a restart: every thread of its process tree, re-pinned.

On a CPU host a slice is a core set, and Linux lets a running thread change its cores (``sched_setaffinity`` on its
thread id), so a re-shape that keeps the GMIs and only trades cores for as many others (a packed member leaving a
core it shared for an idle one) needs no stop, checkpoint and start: each thread's cores are mapped position by
position from the old set onto the new one, which keeps a GMI pinned to its own core (``backend.pin_cores``) on its
own core. Affinity is per thread: threads started later inherit their creator's.
"""

from __future__ import annotations

import contextlib
import os

import psutil


def tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    try:
        return [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def move_cores(old: list[int], new: list[int], pid: int | None = None) -> int:
    """Re-pin every thread of ``pid``'s tree (this process by default) from ``old`` onto ``new``; threads moved.

    Core ``old[i]`` becomes ``new[i]``; cores outside ``old`` stay. A thread that ends meanwhile is skipped.
    """
    if len(old) != len(new):
        raise ValueError(f"move_cores: {len(old)} cores onto {len(new)}; a live move keeps the count")
    where = dict(zip(sorted(old), sorted(new), strict=True))
    moved = 0
    for proc in tree(os.getpid() if pid is None else pid):
        for tid in threads(proc):
            with contextlib.suppress(OSError):  # ended, or a zombie
                have = os.sched_getaffinity(tid)
                want = {where.get(c, c) for c in have}
                if want != have:
                    os.sched_setaffinity(tid, want)
                    moved += 1
    return moved
