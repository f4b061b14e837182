"""SIGTERM becomes an exception inside ``sigterm_raises`` and the default action is restored after."""

import os
import signal

import pytest

from gmiexp.signals import sigterm_raises


def test_sigterm_raises_the_given_exception_then_restores_the_default():
    with pytest.raises(KeyboardInterrupt), sigterm_raises(lambda signum: KeyboardInterrupt(signum)):
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_default_is_exit_code_143_and_a_foreign_handler_is_left_alone():
    with pytest.raises(SystemExit) as e, sigterm_raises():
        os.kill(os.getpid(), signal.SIGTERM)
    assert e.value.code == 143
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda *a: seen.append(1))
    try:
        with sigterm_raises():
            os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [1]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_graceful_stop_first_asks_the_relay_is_ignored_a_second_stops_at_once():
    from gmiexp.signals import GracefulStop

    now = [0.0]
    stop = GracefulStop(relay_s=1.0, clock=lambda: now[0])
    assert not stop.requested
    stop(signal.SIGINT)
    assert stop.requested and stop.signum == signal.SIGINT
    now[0] = 0.3
    stop(signal.SIGINT)  # the launcher relaying the same Ctrl-C
    now[0] = 5.0
    with pytest.raises(KeyboardInterrupt):
        stop(signal.SIGINT)  # a person's second Ctrl-C
