"""A GMI dies with its launcher, and takes the run's shared-memory segments with it.

``kill -9`` of ``python -m gmiexp`` runs no ``finally``: elastic cannot stop the
workers, and the launcher cannot unlink ``/dev/shm/gmiexp_<tag>_*``. So each
worker binds itself to the launcher:

* ``prctl(PR_SET_PDEATHSIG, SIGNAL)``: the kernel signals the worker when its
  parent dies. Elastic's ``elastic_launch`` runs its agent inside the launcher.
  A cold worker is started by it with ``subprocess.Popen``, so its parent is the
  launcher itself; a warm one (:mod:`gmiexp.launch.warm`) is forked by the fork
  server, which exits when the launcher dies, so the signal follows one step
  later. Where an agent sits in between (a separate ``torchrun``), it follows
  that agent.
* a watch thread, the fallback for every other case (the parent is not the
  launcher, the launcher died before ``prctl`` ran, or the main thread sits in a
  C call so the signal handler waits): it polls the launcher's pid and start time
  (a launcher killed but not yet reaped counts as gone).

Either way the worker unlinks the run's segments (peers that still map them keep
their memory until they exit too) and leaves with ``os._exit``, so no ``finally``
can block. A dedicated signal, not SIGTERM: elastic stops workers with SIGTERM
and that path must keep its default, immediate behaviour. Nor SIGUSR1/SIGUSR2: Slurm
delivers its warning signal (submitit's SIGUSR2) to every process of a job step, and
a GMI must not take a requeue warning for its launcher's death
(:mod:`gmiexp.launch.preemption`); a real-time signal is one no scheduler sends.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

import psutil

ENV = "GMIEXP_LAUNCHER"  # "<pid>:<start time>" of the launcher, set for its workers
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
SIGNAL = int(signal.SIGRTMIN) + 2  # sent only by the kernel (PR_SET_PDEATHSIG) when the launcher dies
EXIT_CODE = 70  # the launcher is gone


def identity(pid: int | None = None) -> str:
    """``<pid>:<start time>`` of a process (start time guards against pid reuse)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{psutil.Process(pid).create_time():.3f}"


def alive(ident: str) -> bool:
    """Whether the process ``ident`` names still runs (a zombie, dead but not yet reaped by its parent, does not)."""
    pid, _, started = ident.partition(":")
    try:
        p = psutil.Process(int(pid))
        return abs(p.create_time() - float(started)) < 0.01 and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, ValueError):
        return False


def set_pdeathsig(sig: int) -> bool:
    """Ask the kernel for ``sig`` when this process's parent dies (Linux only; False elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def bind(on_orphaned: Callable[[], None], launcher: str | None = None, interval_s: float = 0.2) -> bool:
    """Call ``on_orphaned`` then exit once the launcher is gone; False when no launcher is named."""
    launcher = launcher or os.environ.get(ENV)
    if not launcher:
        return False
    parent = os.getppid()
    done = threading.Lock()

    def leave() -> None:
        if not done.acquire(blocking=False):
            return
        with contextlib.suppress(Exception):
            on_orphaned()
        os._exit(EXIT_CODE)

    signal.signal(SIGNAL, lambda *_: leave())
    set_pdeathsig(SIGNAL)
    if os.getppid() != parent or not alive(launcher):  # died before prctl took effect
        leave()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if not alive(launcher):
                leave()

    threading.Thread(target=watch, name="gmiexp-lifeline", daemon=True).start()
    return True


JOB_ENV = "GMIEXP_JOB_OF"  # "<pid>:<start time>" of the pack launcher or population controller that started a run


def job_env() -> dict[str, str]:
    """The environment of a job this process starts and stops as a whole: it follows this process (:func:`follow`)."""
    return {**os.environ, JOB_ENV: identity()}


def follow(parent: str | None = None, interval_s: float = 0.5) -> bool:
    """Stop this run as on Ctrl-C once the process that started it as a job is gone; False when none did.

    A pack launcher's and a population controller's jobs run in sessions of their own, so that each is stopped as
    a whole, and ``kill -9`` of the launcher reaches none of them: they would train on as orphans, holding their
    slots and run dirs, and the same command could not go on with them. SIGINT to this process is the terminal's
    Ctrl-C (the GMIs end their epoch, the run checkpoints and exits 130), and it is the signal the launcher stops
    its jobs with; a job started with SIGINT ignored (a script's ``&``) takes it as Python's default here.
    """
    parent = parent or os.environ.get(JOB_ENV)
    if not parent:
        return False
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    me = os.getpid()

    def watch() -> None:
        while alive(parent):
            time.sleep(interval_s)
        os.kill(me, signal.SIGINT)

    threading.Thread(target=watch, name="gmiexp-job-of", daemon=True).start()
    return True
