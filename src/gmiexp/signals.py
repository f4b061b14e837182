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
