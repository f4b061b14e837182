"""Backoff.wait: readiness, deadline, dead peer, periodic check, custom idle, interrupts."""

import subprocess
import sys
import time

import pytest

from gmiexp.shm.wait import Backoff, PeerDied

FAST = Backoff(spin=2, spin_s=1e-5, min_sleep_s=1e-6, max_sleep_s=1e-4, check_s=0.01)


def countdown(n):
    left = [n]

    def ready():
        left[0] -= 1
        return left[0] <= 0

    return ready


def test_returns_when_ready_after_sleeping():
    FAST.wait(countdown(1000), timeout=5)


def test_timeout_message_names_the_wait():
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"ring empty: timed out after 0.05 s"):
        FAST.wait(lambda: False, 0.05, "ring empty")
    assert time.monotonic() - t0 < 2


def test_dead_peer_raises_unless_it_finished_first():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    with pytest.raises(PeerDied, match=f"ring full: peer process {p.pid} exited"):
        FAST.wait(lambda: False, 5, "ring full", peer=lambda: p.pid)
    slow = Backoff(spin=0, spin_s=0, check_s=0)
    slow.wait(countdown(2), 5, peer=lambda: p.pid)  # ready again at the liveness check: no error


def test_check_runs_while_waiting_and_its_error_propagates():
    calls = []

    def check():
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Backoff(spin=0, spin_s=0, check_s=0).wait(lambda: False, check=check)
    assert len(calls) == 3


def test_idle_replaces_the_sleep():
    slept = []
    Backoff(spin=0, spin_s=0, min_sleep_s=1e-3, max_sleep_s=4e-3).wait(countdown(5), idle=slept.append)
    assert slept == [1e-3, 2e-3, 4e-3, 4e-3]
