"""Named POSIX shared-memory segments for one run: owner-only, unlinked at close, at exit and by tag.

Every segment is ``/dev/shm/gmiexp_<tag>_<name>``. The run tag comes from an explicit argument or
``GMIEXP_RUN_TAG`` (the launcher sets it for all GMIs of a run), so ``cleanup_run(tag)`` can remove
whatever a crashed process left behind. Segments are created with mode 0600 through ``os.open``
(not ``multiprocessing.shared_memory``, whose resource tracker in Python <= 3.12 also unlinks
segments that a process merely attached to).
"""

from __future__ import annotations

import atexit
import mmap
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

SHM_DIR = Path("/dev/shm")
PREFIX = "gmiexp"
_TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,63}$")
_owned: dict[str, tuple[Path, int]] = {}  # name -> (path, creating pid)


def run_tag(tag: str | None = None) -> str:
    """The run tag: the argument, else ``GMIEXP_RUN_TAG``, else a per-process one."""
    tag = tag or os.environ.get("GMIEXP_RUN_TAG") or f"p{os.getpid()}"
    if not _TAG_RE.match(tag):
        raise ValueError(f"invalid run tag {tag!r}; valid: letters, digits, '.', '-' (<= 64 chars)")
    return tag


def segment_name(name: str, tag: str | None = None) -> str:
    """Full segment file name for ``name`` in run ``tag``; a random suffix keeps names unique."""
    return f"{PREFIX}_{run_tag(tag)}_{name}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Segment:
    """A mapped shared-memory segment. ``owner`` is the process that created it (and unlinks it)."""

    name: str
    size: int
    buf: mmap.mmap
    owner: bool

    @property
    def path(self) -> Path:
        return SHM_DIR / self.name

    def unlink(self) -> None:
        """Remove the name; processes that mapped it keep their mapping (delivered data survives)."""
        _owned.pop(self.name, None)
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def close(self) -> None:
        """Unlink (owner); the mapping itself goes when the last view of it is garbage collected.

        Never ``mmap.close()`` here: ``torch.frombuffer`` keeps a reference to the mmap but no
        buffer export, so an explicit close would leave live tensors pointing at unmapped memory.
        """
        if self.owner:
            self.unlink()


def create(name: str, size: int) -> Segment:
    """Create a zero-filled segment of ``size`` bytes, readable and writable by its owner only."""
    path = SHM_DIR / name
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.fchmod(fd, 0o600)  # umask cannot widen it, but be explicit
        os.ftruncate(fd, size)
        buf = mmap.mmap(fd, size)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)
    _owned[name] = (path, os.getpid())
    return Segment(name, size, buf, owner=True)


def attach(name: str) -> Segment:
    """Map an existing segment by name."""
    fd = os.open(SHM_DIR / name, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        buf = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    return Segment(name, size, buf, owner=False)


def cleanup_run(tag: str) -> list[str]:
    """Remove every ``/dev/shm/gmiexp_<tag>_*`` segment (call in the launcher's finally-block)."""
    removed = []
    for path in SHM_DIR.glob(f"{PREFIX}_{run_tag(tag)}_*"):
        try:
            path.unlink()
            removed.append(path.name)
        except FileNotFoundError:
            pass
    return removed


def launcher_tag(pid: int | None = None) -> str:
    """A run tag that names its launcher's pid (``<pid>-<random>``), so a later run can tell it is dead."""
    return f"{os.getpid() if pid is None else pid}-{uuid.uuid4().hex[:8]}"


_LAUNCHER_TAG = re.compile(rf"^{PREFIX}_(\d+)-[0-9a-f]{{8}}_")


def sweep_dead_runs() -> list[str]:
    """Remove the segments of runs whose launcher is gone (killed before its cleanup and its GMIs' ran).

    Only tags made by :func:`launcher_tag` are considered, and only when no process has that pid:
    a reused pid keeps its segments (the safe side); other users' segments cannot be unlinked.
    """
    removed = []
    for path in SHM_DIR.glob(f"{PREFIX}_*"):
        m = _LAUNCHER_TAG.match(path.name)
        if m is None or _pid_alive(int(m.group(1))):
            continue
        try:
            path.unlink()
            removed.append(path.name)
        except (FileNotFoundError, PermissionError):
            pass
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def leftovers(tag: str) -> list[str]:
    """Names of the run's segments still present (for tests and diagnostics)."""
    return sorted(p.name for p in SHM_DIR.glob(f"{PREFIX}_{run_tag(tag)}_*"))


@atexit.register
def _unlink_owned_at_exit() -> None:
    for path, pid in list(_owned.values()):
        if pid == os.getpid():  # a forked child must not unlink its parent's segments
            path.unlink(missing_ok=True)
    _owned.clear()
