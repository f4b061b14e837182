"""SIGTERM as an exception, so cleanup (``finally``, ``except``) runs when a job scheduler or ``kill`` stops us."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


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


class GracefulStop:
    """A GMI's first SIGINT/SIGTERM asks its loop to stop after the epoch; a second one stops it at once.

    Ctrl-C reaches the launcher and every GMI of the terminal's process group, and the launcher (elastic) relays
    the signal to the GMIs again a moment later: a repeat within ``relay_s`` of the first is that relay, not a
    second Ctrl-C. The second raises KeyboardInterrupt where the GMI is (it then writes nothing more).
    """

    def __init__(self, relay_s: float = 1.0, clock: Callable[[], float] | None = None) -> None:
        import time

        self.relay_s, self.clock = relay_s, clock or time.monotonic
        self.at: float | None = None
        self.signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.at is not None

    def __call__(self, signum: int, _frame: object = None) -> None:
        now = self.clock()
        if self.at is None:
            self.at, self.signum = now, signum
            return
        if now - self.at > self.relay_s:
            raise KeyboardInterrupt(f"second signal {signum}: stopping at once")

    def install(self) -> GracefulStop:
        """Handle SIGINT and SIGTERM (main thread only)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self)
        return self


_stop: GracefulStop | None = None


def graceful_stop(relay_s: float = 1.0) -> GracefulStop:
    """Install the process's :class:`GracefulStop` (a GMI worker calls this at start)."""
    global _stop
    _stop = GracefulStop(relay_s).install()
    return _stop


def stop_requested() -> bool:
    """Whether this process was asked to stop after its current epoch (False where nothing was installed)."""
    return _stop is not None and _stop.requested
