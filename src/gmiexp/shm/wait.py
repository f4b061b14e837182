"""Waiting on a peer through shared memory: spin briefly, then yield, then sleep with exponential backoff.

A busy-spinning waiter would take a whole core from the simulators; a sleeping one adds latency
(a ``time.sleep`` of a few microseconds really takes ~50-100 us on Linux). So a wait first polls
``spin`` times and for at least ``spin_s`` seconds, the time a transfer in flight takes to land
(a 1 MiB copy is ~100 us), before it sleeps with exponential backoff: latency stays in the
microseconds while the peer is active, and an idle wait costs ~nothing. Every user states its
policy as a :class:`Backoff` and its own liveness, deadline and heartbeat as arguments of
:meth:`Backoff.wait`.

Interrupts: nothing here catches an exception. A KeyboardInterrupt (delivered between polls; a
single sleep lasts at most ``max_sleep_s``, or what ``idle`` allows) and whatever ``check`` raises
propagate to the caller, which tells its peers if it must (the reduction sets its abort word).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from gmiexp.shm.alive import pid_alive


class PeerDied(RuntimeError):
    """The process at the other end exited (or was killed) while we were waiting on it."""


def _yield_or_sleep(seconds: float) -> None:
    if seconds < 1e-5:
        os.sched_yield()
    else:
        time.sleep(seconds)


@dataclass(frozen=True)
class Backoff:
    """Wait policy: poll ``spin`` times, then ``spin_s`` s, then sleep ``min_sleep_s`` doubling to ``max_sleep_s``.

    ``spin_yield`` yields the core between the timed polls; ``check_s`` spaces the liveness checks.
    """

    spin: int = 200
    min_sleep_s: float = 2e-6
    max_sleep_s: float = 1e-3
    check_s: float = 0.05
    spin_s: float = 100e-6
    spin_yield: bool = False

    def wait(
        self,
        ready: Callable[[], bool],
        timeout: float | None = None,
        what: str = "wait",
        *,
        peer: Callable[[], int] | None = None,
        check: Callable[[], None] | None = None,
        idle: Callable[[float], None] = _yield_or_sleep,
    ) -> None:
        """Return once ``ready()``.

        Raises TimeoutError after ``timeout`` s (``None``: never), and PeerDied when the pid
        ``peer()`` names has exited (a peer that finished and then exited is not an error). While
        sleeping, ``check()`` runs every ``check_s`` s (a heartbeat, or a test that raises its own
        error); ``idle(s)`` sleeps about ``s`` seconds (e.g. on a futex a peer wakes).
        """
        for _ in range(self.spin):
            if ready():
                return
        start = last_check = time.monotonic()
        if self.spin_s > 0:  # data is likely imminent: keep polling a little before sleeping
            clock, until = time.perf_counter, time.perf_counter() + self.spin_s
            while clock() < until:
                if ready():
                    return
                if self.spin_yield:
                    os.sched_yield()
        sleep = self.min_sleep_s
        while not ready():
            now = time.monotonic()
            if timeout is not None and now - start >= timeout:
                raise TimeoutError(f"{what}: timed out after {timeout} s")
            if now - last_check >= self.check_s:
                last_check = now
                if check is not None:
                    check()
                if peer is not None and not pid_alive(pid := peer()):
                    if ready():
                        return
                    raise PeerDied(f"{what}: peer process {pid} exited")
            idle(sleep)
            sleep = min(sleep * 2, self.max_sleep_s)
