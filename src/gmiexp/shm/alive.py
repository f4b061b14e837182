"""Is a peer process still running? The one liveness check behind every shared-memory wait."""

from __future__ import annotations

import os

_PROC = os.path.isdir("/proc/self")  # Linux: /proc tells a zombie from a live process


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie counts as dead, another user's process as alive.

    ``pid <= 0`` (a peer not bound yet) and our own pid are alive: there is nothing to judge.
    """
    if pid <= 0 or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not _PROC:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except FileNotFoundError:
        return False  # exited (and was reaped) since the signal check
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")
