"""The MPS daemons of one run: start the private ones, lease the shared ones, check the existing ones.

:mod:`gmiexp.backends.mps_daemon` drives one daemon; :mod:`gmiexp.backends.mps_shared` counts the runs that
hold a shared one; this module puts them together for a run (the launcher's session, a packed sweep).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gmiexp.backends import mps_shared
from gmiexp.backends.mps_daemon import Daemon, check_existing, quit_private, start
from gmiexp.signals import sigterm_raises


@contextmanager
def running(daemons: list[Daemon]) -> Iterator[None]:
    """Start private daemons, join shared ones, check existing ones; quit exactly what this run must.

    A private daemon is quit by this run; a shared one by the last run that holds it; an existing
    one never.
    """
    for d in daemons:
        if d.mode == "existing":
            check_existing(d)
    started: list[Daemon] = []
    leases: list[tuple[Daemon, Path]] = []
    with sigterm_raises():
        try:
            for d in daemons:
                if d.mode == "shared":
                    leases.append((d, mps_shared.acquire(d)))
                elif d.mode == "private":
                    started.append(d)  # quit even when start fails half way (pid file may exist)
                    start(d)
            yield
        finally:
            for d, lease in reversed(leases):
                mps_shared.release(d, lease)
            for d in reversed(started):
                quit_private(d)
