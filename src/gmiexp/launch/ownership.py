"""The run directory: writable before Hydra writes into it, and owned by one launcher at a time.

One launcher per run directory: ``<run_dir>/launcher.lock``, an ``flock`` held for the launcher's life.

Two runs in one directory would append to the same histories and write checkpoints under the same names.
The kernel drops an ``flock`` when its holder exits however it exits (``kill -9`` included), so a dead launcher
never keeps the directory; the same run started again after the first ended (a requeue) takes it at once.
The file says who holds it (pid, host, start time), for the second run's message.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from gmiexp.errors import ConfigError

LOCK_NAME = "launcher.lock"


@contextlib.contextmanager
def own_run_dir(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for this process; ConfigError (exit 2) naming the holder when another launcher does."""
    path = Path(run_dir) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by the GMIs (O_CLOEXEC is Python's default)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            who = f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}" if holder else "another process"
            raise ConfigError(
                f"invalid run dir {run_dir}: another gmiexp run ({who}) is running there; valid: a new run dir "
                "(hydra.run.dir=...), or wait for that run to end (then the same command resumes it)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}).encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _read(fd: int) -> dict:
    try:
        return json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        return {}


def unwritable(run_dir: Path) -> str | None:
    """Why ``run_dir`` cannot be created or written (its nearest existing ancestor decides), or None."""
    p = Path(run_dir).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    if os.statvfs(p).f_flag & os.ST_RDONLY:
        return f"{p} is on a read-only file system"
    if not os.access(p, os.W_OK | os.X_OK):
        return f"{p} is not writable by this user"
    return None


#: what this command's Hydra run found before writing, set by RunDirCheck: "top", the outermost directory it creates
#: (None: the run dir existed); "subdir" and "record", an existing run dir's ``.hydra/`` and its files, which Hydra
#: rewrites with this command's before gmiexp sees them; "sweep_top", the same as "top" for a multirun's sweep dir
found: dict[str, Any] = {"top": None, "subdir": None, "record": {}, "sweep_top": None}


def first_missing(run_dir: Path) -> Path | None:
    """The outermost directory on ``run_dir``'s path that does not exist yet (None when ``run_dir`` exists)."""
    p = Path(run_dir).absolute()
    top = None
    while not p.exists() and p != p.parent:
        top, p = p, p.parent
    return top


def hydra_record(output_subdir: Path) -> dict[Path, bytes]:
    """The files of a run dir's Hydra record as they are now (none when it has none)."""
    if not output_subdir.is_dir():
        return {}
    return {p: p.read_bytes() for p in output_subdir.iterdir() if p.is_file()}


def restore_record(subdir: Path | None, record: dict[Path, bytes]) -> None:
    """Put an existing run dir's Hydra record back as :func:`hydra_record` read it (none: no ``.hydra/``)."""
    if subdir is None or not subdir.is_dir():
        return
    for p in subdir.iterdir():
        if p.is_file() and p not in record:
            p.unlink()
    for p, data in record.items():
        p.write_bytes(data)
    if not record and not any(subdir.iterdir()):
        subdir.rmdir()


def discard_refused(run_dir: Path, job_log: str) -> bool:
    """Undo what Hydra wrote for a refused job: bad input leaves nothing behind, and changes no run's record.

    Hydra creates the run dir, its ``.hydra/`` and the job's log before gmiexp sees the config. A run dir this
    command created and that holds only those is removed (True); one where anything was launched is kept. One that
    existed (a run resumed there, or one a launcher is running) is kept with its ``.hydra/`` put back as it was,
    the record of the command its run ran; its job log keeps the refusal.
    """
    restore_record(found["subdir"], found["record"])
    run_dir = Path(run_dir).absolute()
    return _remove(found["top"], run_dir, only_hydras(run_dir, job_log))


def discard_refused_sweep(sweep_dir: Path, job_log: str) -> bool:
    """A sweep a refused job stopped before any job ran: remove the sweep dir when this command created it.

    Hydra wrote ``multirun.yaml`` and each started job's dir (its ``.hydra/`` and log) before the job refused; a
    sweep where any job left more (it ran) is kept whole.
    """
    sweep_dir = Path(sweep_dir).absolute()
    jobs = [p for p in sweep_dir.iterdir() if p.name != "multirun.yaml"] if sweep_dir.is_dir() else []
    return _remove(found["sweep_top"], sweep_dir, all(only_hydras(p, job_log) for p in jobs))


def only_hydras(run_dir: Path, job_log: str) -> bool:
    """Whether ``run_dir`` is a directory holding nothing but what Hydra writes for a job (and the launcher lock)."""
    return run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= {".hydra", job_log, LOCK_NAME}


def _remove(top: Path | None, inside: Path, removable: bool) -> bool:
    if top is None or not inside.is_relative_to(top) or not removable:
        return False
    shutil.rmtree(top, ignore_errors=True)
    return not top.exists()


class RunDirCheck(Callback):
    """Hydra callback (``hydra.callbacks`` in conf/config.yaml): refuse an unwritable run dir in one line, exit 2.

    Hydra creates the run dir and writes ``.hydra/`` before gmiexp runs; on a read-only place that failed with
    Hydra's traceback. It also notes what a refusal must undo (:func:`discard_refused`): whether this command
    creates the run dir, and an existing one's Hydra record (Hydra writes it after this hook).
    """

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        run_dir = Path(str(config.hydra.run.dir))
        self._check(str(run_dir), "hydra.run.dir")
        found["top"] = first_missing(run_dir)
        subdir = config.hydra.output_subdir
        found["subdir"] = run_dir.absolute() / str(subdir) if subdir is not None and found["top"] is None else None
        found["record"] = hydra_record(found["subdir"]) if found["subdir"] is not None else {}

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        self._check(str(config.hydra.sweep.dir), "hydra.sweep.dir")
        found["sweep_top"] = first_missing(Path(str(config.hydra.sweep.dir)))

    @staticmethod
    def _check(run_dir: str, key: str) -> None:
        import sys

        why = unwritable(Path(run_dir))
        if why:
            print(f"gmiexp: error: invalid {key}={run_dir}: {why}; valid: a writable place ({key}=...)",
                  file=sys.stderr, flush=True)
            raise SystemExit(2)


def running(run_dir: Path) -> bool:
    """Whether a launcher holds ``run_dir`` now (its ``flock``; a dead launcher's is gone)."""
    path = Path(run_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
