"""SIGTERM as an exception, so cleanup (``finally``, ``except``) runs when a job scheduler or ``kill`` stops us."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def _exit_code(signum: int) -> BaseException:
    return SystemExit(128 + signum)


@contextmanager
def sigterm_raises(make: Callable[[int], BaseException] = _exit_code) -> Iterator[None]:
    """Turn SIGTERM into ``make(signum)`` (default SystemExit(143)) for the block.

    Only in the main thread and only where SIGTERM still has its default action: a handler someone
    else installed (elastic's agent, a test harness) is left alone.
    """
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def _raise(signum: int, _frame: object) -> None:
        raise make(signum)

    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


STOP_FILE_ENV = "GMIEXP_STOP_FILE"  # set by the launcher for its GMIs: the file that asks them to stop


class LauncherStop:
    """The launcher's SIGINT/SIGTERM while its GMIs train: the first asks them to stop, a second stops them now.

    The first signal writes the stop file the GMIs look for after each epoch (:func:`stop_requested`): they end
    the epoch, GMI 0 checkpoints, and they exit 0. A repeat within ``relay_s`` is the same Ctrl-C reaching us
    twice; a later one raises KeyboardInterrupt, and elastic then stops the GMIs with SIGTERM at once.
    GMIs ignore SIGINT (a terminal's Ctrl-C reaches the whole process group) and keep SIGTERM's default
    action, so elastic stopping them after a failure is as quick as ever.
    """

    def __init__(self, stop_file: Path, relay_s: float = 1.0, clock: Callable[[], float] | None = None,
                 on_first: Callable[[], None] | None = None) -> None:
        import time

        self.stop_file, self.relay_s, self.clock = stop_file, relay_s, clock or time.monotonic
        self.on_first = on_first  # e.g. stop at once the GMIs whose role does not look at the stop file
        self.at: float | None = None
        self.signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.at is not None

    def __call__(self, signum: int, _frame: object = None) -> None:
        now = self.clock()
        if self.at is None:
            self.at, self.signum = now, signum
            self.stop_file.write_text(signal.Signals(signum).name)
            if self.on_first is not None:
                self.on_first()
            return
        if now - self.at > self.relay_s:
            raise KeyboardInterrupt(f"second {signal.Signals(signum).name}: stopping every GMI at once")

    @contextmanager
    def installed(self) -> Iterator[LauncherStop]:
        """Handle SIGINT and SIGTERM for the block (main thread only).

        Elastic must leave them alone: ``LaunchConfig(signals_to_handle=ELASTIC_SIGNALS)``.
        """
        import os

        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        self.stop_file.unlink(missing_ok=True)
        previous = {sig: signal.signal(sig, self) for sig in (signal.SIGINT, signal.SIGTERM)}
        env = os.environ.get(STOP_FILE_ENV)
        os.environ[STOP_FILE_ENV] = str(self.stop_file)  # the GMIs inherit it
        try:
            yield self
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)
            if env is None:
                os.environ.pop(STOP_FILE_ENV, None)
            else:
                os.environ[STOP_FILE_ENV] = env


ELASTIC_SIGNALS = "SIGHUP,SIGQUIT"  # what elastic's agent handles while LauncherStop has SIGINT and SIGTERM


def ignore_interrupt_in_gmi() -> None:
    """A GMI of a launcher that stops gracefully ignores SIGINT (the launcher decides); SIGTERM stays default."""
    import os

    if os.environ.get(STOP_FILE_ENV):
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def stop_requested() -> bool:
    """Whether this GMI's launcher asked it to stop after the current epoch (Ctrl-C or SIGTERM)."""
    import os

    path = os.environ.get(STOP_FILE_ENV)
    return bool(path) and os.path.exists(path)
