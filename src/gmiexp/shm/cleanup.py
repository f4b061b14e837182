"""Removing a run's segments that no process unlinked: a crashed GMI's (by tag) or a killed run's (by pid)."""

from __future__ import annotations

from gmiexp.shm.alive import pid_alive
from gmiexp.shm.names import LAUNCHER_TAG_RE, PREFIX, SHM_DIR, run_glob


def cleanup_run(tag: str) -> list[str]:
    """Remove every ``/dev/shm/gmiexp_<tag>_*`` segment (call in the launcher's finally-block)."""
    removed = []
    for path in SHM_DIR.glob(run_glob(tag)):
        try:
            path.unlink()
            removed.append(path.name)
        except FileNotFoundError:
            pass
    return removed


def leftovers(tag: str) -> list[str]:
    """Names of the run's segments still present (for tests and diagnostics)."""
    return sorted(p.name for p in SHM_DIR.glob(run_glob(tag)))


def sweep_dead_runs() -> list[str]:
    """Remove the segments of runs whose launcher is gone (killed before its cleanup and its GMIs' ran).

    Only tags made by :func:`gmiexp.shm.names.launcher_tag` are considered, and only when that pid
    no longer runs: a reused pid keeps its segments (the safe side); other users' cannot be unlinked.
    """
    removed = []
    for path in SHM_DIR.glob(f"{PREFIX}_*"):
        m = LAUNCHER_TAG_RE.match(path.name)
        if m is None or pid_alive(int(m.group(1))):
            continue
        try:
            path.unlink()
            removed.append(path.name)
        except (FileNotFoundError, PermissionError):
            pass
    return removed
