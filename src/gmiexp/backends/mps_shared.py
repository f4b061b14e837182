"""``backend.daemon=shared``: one MPS control daemon for a user's concurrent runs on one GPU set.

MPS shares a GPU only among clients of one server: runs that each start their own
daemon get separate servers, which the GPU time-slices. So packed runs meet at one
daemon, whose directory (``<tmp>/gmiexp-mps-<uid>-shared-<gpu set>``) also holds

* ``lock``: an ``flock`` that serialises every start, join, leave and quit;
* ``holders/<pid>-<token>``: one reference per run holding the daemon, with the
  holder's pid and process start time.

The first run finds no live holder and starts the daemon; the last one to leave
finds none left and quits it. A reference whose process is gone (a crashed or
``kill -9``-ed run) or whose pid now belongs to another process counts as absent,
so a dead run never keeps the daemon alive: the next run to join or leave prunes
it, and a daemon left serving by a crashed last holder is joined, not started twice.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from gmiexp.backends.mps_daemon import Daemon, MPSError, is_serving, pid_of, quit_daemon, start

log = logging.getLogger(__name__)
LOCK = "lock"
HOLDERS = "holders"


def root_of(d: Daemon) -> Path:
    return Path(d.pipe_dir).parent


@contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the daemon's lock (blocks while another run starts, joins, leaves or quits it)."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    with (root / LOCK).open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _started_at(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def holds(ref: Path) -> bool:
    """The reference's process is alive and is the same process (not a reused pid)."""
    try:
        data = json.loads(ref.read_text())
        pid, t0 = int(data["pid"]), float(data["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    now = _started_at(pid)
    return now is not None and abs(now - t0) < 1.0


def live_holders(root: Path) -> list[Path]:
    """References of live runs; dead ones are removed (call under the lock)."""
    live = []
    for ref in sorted((root / HOLDERS).glob("*")):
        if holds(ref):
            live.append(ref)
        else:
            log.info("MPS daemon %s: dropping the reference of a run that is gone (%s)", root, ref.name)
            ref.unlink(missing_ok=True)
    return live


def _ensure_serving(d: Daemon, others: list[Path]) -> None:
    if pid_of(d.pipe_dir) is None:
        if others:  # cannot happen unless someone quit it by hand: start it again
            log.warning("shared MPS daemon at %s is gone although runs hold it; starting it", d.pipe_dir)
        try:
            start(d)
        except BaseException:
            if pid_of(d.pipe_dir) is not None:
                quit_daemon(d)
            raise
        log.info("started the shared MPS daemon at %s", d.pipe_dir)
    elif not is_serving(d):
        if others:
            raise MPSError(f"the shared MPS daemon at {d.pipe_dir} does not answer although {len(others)} "
                           f"run(s) hold it; see {d.log_dir}/control.log")
        quit_daemon(d)  # left by a crashed run and broken: replace it
        start(d)
    else:
        log.info("joined the shared MPS daemon at %s (%d other run(s))", d.pipe_dir, len(others))


def acquire(d: Daemon) -> Path:
    """Join the shared daemon (starting it if no live run holds it); returns this run's reference."""
    root = root_of(d)
    with locked(root):
        others = live_holders(root)
        _ensure_serving(d, others)
        refs = root / HOLDERS
        refs.mkdir(exist_ok=True)
        pid = os.getpid()
        ref = refs / f"{pid}-{uuid.uuid4().hex[:8]}"
        ref.write_text(json.dumps({"pid": pid, "started": _started_at(pid)}))
        return ref


def release(d: Daemon, ref: Path) -> None:
    """Drop this run's reference; the last live holder quits the daemon."""
    root = root_of(d)
    with locked(root):
        ref.unlink(missing_ok=True)
        if not live_holders(root) and pid_of(d.pipe_dir) is not None:
            quit_daemon(d)
            log.info("quit the shared MPS daemon at %s (last run left)", d.pipe_dir)
