"""Named POSIX shared-memory segments: owner-only, unlinked at close, at exit, or by run tag.

A segment is a file ``/dev/shm/<name>`` (see :mod:`gmiexp.shm.names`) created with mode 0600 through
``os.open``, not ``multiprocessing.shared_memory``, whose resource tracker in Python <= 3.12 also
unlinks segments a process merely attached to. Every name this process creates is kept in one
registry until it is unlinked; an ``atexit`` hook unlinks what is left, so only a SIGKILL between
creating a segment and sealing it can leave one behind (:mod:`gmiexp.shm.cleanup` removes those).
"""

from __future__ import annotations

import atexit
import errno
import mmap
import os
import stat
import threading
from pathlib import Path

from gmiexp.shm.names import SHM_DIR

_owned: dict[str, int] = {}  # name -> pid of the creator, for names not unlinked yet
_owned_lock = threading.Lock()


class Segment:
    """A mapped segment. ``owner``: this process created it, so :meth:`close` unlinks the name."""

    __slots__ = ("name", "size", "buf", "mode", "owner", "_linked")

    def __init__(self, name: str, size: int, buf: mmap.mmap, mode: int, owner: bool) -> None:
        self.name = name
        self.size = size
        self.buf = buf
        self.mode = mode  # permission bits at creation/attach (0o600)
        self.owner = owner
        self._linked = True

    @property
    def path(self) -> Path:
        return SHM_DIR / self.name

    def unlink(self) -> None:
        """Remove the name, once (a later segment of the same name is not ours); mappings stay valid."""
        if not self._linked:
            return
        self._linked = False
        _forget(self.name)
        self.path.unlink(missing_ok=True)

    def close(self, unmap: bool = False) -> None:
        """Unlink (owner) and, with ``unmap``, unmap now unless a memoryview still exports the buffer.

        Without ``unmap`` the mapping goes when its last view is garbage collected. Neither
        ``torch.frombuffer`` tensors nor numpy arrays over the mmap hold a buffer export, so unmapping
        under them leaves views pointing at unmapped memory: pass ``unmap=True`` only when the caller
        has dropped every view it made (the reduction arena does, and documents that a tensor from
        ``ShmArena.buffer`` is valid until the arena grows or closes).
        """
        if self.owner:
            self.unlink()
        if unmap:
            try:
                self.buf.close()
            except BufferError:
                pass


#: what makes a run's segments smaller, for the error of a full ``/dev/shm``: most segments are its channels'
CHANNEL_FIX = "or make channel.slots/channel.target_bytes/channel.store_capacity smaller"


def create(name: str, size: int, replace: bool = False, fix: str = CHANNEL_FIX) -> Segment:
    """Create a zero-filled segment of ``size`` bytes, readable and writable by its owner only.

    ``replace`` first removes a stale segment of the same name (names peers agree on without a
    message repeat across runs with the same tag); otherwise an existing name is an error. ``fix``: what the
    error of a full ``/dev/shm`` suggests besides more of it.
    """
    path = SHM_DIR / name
    if replace:
        path.unlink(missing_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    with _owned_lock:
        _owned[name] = os.getpid()
    try:
        os.fchmod(fd, 0o600)  # umask cannot widen it, but be explicit
        os.ftruncate(fd, size)
        reserve(fd, size, path, fix)
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        buf = mmap.mmap(fd, size)
    except BaseException:
        _forget(name)
        path.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    return Segment(name, size, buf, mode, owner=True)


class ShmFull(OSError):
    """/dev/shm cannot hold a segment: raised at creation, where a process would otherwise die of SIGBUS later."""


def reserve(fd: int, size: int, path: Path, fix: str = CHANNEL_FIX) -> None:
    """Give the segment its pages now (``posix_fallocate``), so a full ``/dev/shm`` fails here, not at first touch.

    ``ftruncate`` alone makes a sparse file: tmpfs supplies pages only when they are written, and a page it
    cannot supply kills the writer with SIGBUS, with no message.
    """
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.ENOMEM):
            raise
        free = free_shm_bytes(path.parent)
        raise ShmFull(e.errno, f"{path.parent} has {amount(free)} free, too little for a {amount(size)} shared-memory "
                               f"segment ({path.name}); in a container raise it (docker run --shm-size=...), {fix}"
                      ) from None


def amount(nbytes: float) -> str:
    """``848.4 MiB``, ``12.0 KiB``, ``1.2 GiB``: a size in messages."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} B"


def free_shm_bytes(directory: Path = SHM_DIR) -> int:
    """Bytes the file system of ``directory`` (``/dev/shm``) has free for an unprivileged writer."""
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def attach(name: str) -> Segment:
    """Map an existing segment by name (its size is the file's)."""
    fd = os.open(SHM_DIR / name, os.O_RDWR)
    try:
        st = os.fstat(fd)
        buf = mmap.mmap(fd, st.st_size)
    finally:
        os.close(fd)
    return Segment(name, st.st_size, buf, stat.S_IMODE(st.st_mode), owner=False)


def _forget(name: str) -> None:
    with _owned_lock:
        _owned.pop(name, None)


@atexit.register
def _unlink_owned_at_exit() -> None:
    pid = os.getpid()
    for name, creator in list(_owned.items()):
        if creator == pid:  # a forked child must not unlink its parent's segments
            (SHM_DIR / name).unlink(missing_ok=True)
    _owned.clear()
