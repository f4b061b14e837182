"""State of one ``python -m gmiexp -m`` sweep shared by the entry point and the launchers.

A failed job does not stop a sweep: the launcher that ran it (Hydra's basic launcher through the task
function, or the ``gmiexp_pack`` launcher) records its directory here, and ``main()`` exits 1 naming
every one once the sweep is over (2 when a job was refused as bad input, 130 when one was interrupted).
``ran`` tells a config error (Hydra exits 1 before any job ran; gmiexp says 2) from a failure later on.
A module of its own, so ``python -m gmiexp`` (module ``__main__``) and the launcher plugins see the same
object.

A job that runs in another process (hydra-submitit-launcher: a Slurm task, a ``submitit_local`` job)
cannot write into this process's state, and must not ``sys.exit`` (submitit then has no result to
return and the sweep dies with its own error). It raises :class:`JobFailed`, which submitit pickles
back to the sweep's process as the Hydra job's failure; unpickling it there records the failure.
"""

from __future__ import annotations

import os
import sys

from gmiexp.errors import LaunchError

#: ``pid``: the process that runs the sweep (``main()``); ``failed``: run dir -> exit code, in order
state: dict = {"ran": False, "failed": {}, "pid": None}


def record_failure(run_dir: str, code: int = 1) -> None:
    state["ran"] = True
    state["failed"].setdefault(str(run_dir), int(code))


def in_sweep_process() -> bool:
    """True in the process that started the sweep (jobs of the basic and pack launchers run there)."""
    return state["pid"] == os.getpid()


def exit_code() -> int:
    """The sweep's exit code: 0, or 130 (a job interrupted), 2 (one refused as bad input), else 1.

    Names the failed jobs on stderr first.
    """
    failed = state["failed"]
    if not failed:
        return 0
    print(f"gmiexp: {len(failed)} multirun job(s) failed: {', '.join(failed)}", file=sys.stderr, flush=True)
    codes = set(failed.values())
    return next((c for c in (130, 2) if c in codes), 1)


class JobFailed(LaunchError):
    """A multirun job's failure as Hydra records it; recorded again wherever it is unpickled (the sweep's process)."""

    def __init__(self, run_dir: str, code: int, message: str = "") -> None:
        self.run_dir, self.code = str(run_dir), int(code)
        super().__init__(message or f"job failed (exit code {code}): {run_dir}")

    def __reduce__(self) -> tuple:
        return _arrived, (self.run_dir, self.code, str(self))


def _arrived(run_dir: str, code: int, message: str) -> JobFailed:
    record_failure(run_dir, code)
    return JobFailed(run_dir, code, message)


def ended_elsewhere(exc: BaseException) -> bool:
    """True when ``exc`` (Hydra's exit) arose from a job that ended in another process without a result.

    submitit raises its own errors in the sweep's process for a job that died (killed, out of memory) or was
    cancelled; Hydra prints them and exits 1 with them as the exit's context. A job ran: not a config error.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__module__.split(".")[0] == "submitit":
            return True
        seen = seen.__context__
    return False


def failed(run_dir: str, code: int, message: str = "") -> JobFailed:
    """Record a job's failure in this process and return the exception that reports it to Hydra.

    A job in a submitit process names its log there: what it printed (the error) is not on the sweep's stderr.
    """
    record_failure(run_dir, code)
    text = message or f"job failed (exit code {code}): {run_dir}"
    if not in_sweep_process():
        try:
            import submitit

            text += f" (its output: {submitit.JobEnvironment().paths.stderr})"
        except (ImportError, RuntimeError, KeyError):  # not a submitit job
            pass
    return JobFailed(run_dir, code, text)
