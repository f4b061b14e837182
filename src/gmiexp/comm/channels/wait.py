"""Waiting for the peer of a ring: spin briefly, then yield, then sleep with exponential backoff.

A busy-spinning consumer would take a whole core from the simulators; a sleeping one adds latency
(a ``time.sleep`` of a few microseconds really takes ~50-100 us on Linux). So the wait first polls
for ``spin`` tries and at least ``spin_s`` seconds, the time a transfer in flight takes to land
(a 1 MiB copy is ~100 us), before it yields and then sleeps with exponential backoff: latency stays
in the microseconds while the peer is active, and an idle wait costs ~nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass


class PeerDied(RuntimeError):
    """The other end of a channel exited (or was killed) while we were waiting on it."""


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    if pid <= 0:
        return True  # peer not bound yet: nothing to judge
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in (b"Z", b"X")


@dataclass(frozen=True)
class Backoff:
    """Wait policy: poll ``spin`` times and ``spin_s`` s, then sleep ``min_sleep_s`` doubling to ``max_sleep_s``."""

    spin: int = 200
    min_sleep_s: float = 2e-6
    max_sleep_s: float = 1e-3
    peer_check_s: float = 0.05
    spin_s: float = 100e-6

    def wait(
        self,
        ready: Callable[[], bool],
        timeout: float | None,
        peer_pid: Callable[[], int],
        what: str,
    ) -> None:
        """Return once ``ready()``; raise TimeoutError after ``timeout`` s, PeerDied if the peer exits."""
        for _ in range(self.spin):
            if ready():
                return
        start = last_check = time.monotonic()
        if self.spin_s > 0:  # data is likely imminent: keep polling a little before sleeping
            clock, until = time.perf_counter, time.perf_counter() + self.spin_s
            while clock() < until:
                if ready():
                    return
        sleep = self.min_sleep_s
        while not ready():
            now = time.monotonic()
            if timeout is not None and now - start >= timeout:
                raise TimeoutError(f"{what}: timed out after {timeout} s")
            if now - last_check >= self.peer_check_s:
                last_check = now
                if not pid_alive(peer_pid()):
                    if ready():
                        return
                    raise PeerDied(f"{what}: peer process {peer_pid()} exited")
            if sleep < 1e-5:
                os.sched_yield()
            else:
                time.sleep(sleep)
            sleep = min(sleep * 2, self.max_sleep_s)
