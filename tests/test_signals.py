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


def test_launcher_stop_first_asks_the_gmis_the_relay_is_ignored_a_second_stops_at_once(tmp_path, monkeypatch):
    from gmiexp import signals

    now = [0.0]
    stop = signals.LauncherStop(tmp_path / "stop", relay_s=1.0, clock=lambda: now[0])
    monkeypatch.setenv(signals.STOP_FILE_ENV, str(tmp_path / "stop"))
    assert not stop.requested and not signals.stop_requested()
    stop(signal.SIGINT)
    assert stop.requested and signals.stop_requested() and (tmp_path / "stop").read_text() == "SIGINT"
    now[0] = 0.3
    stop(signal.SIGINT)  # the same Ctrl-C, seen twice
    now[0] = 5.0
    with pytest.raises(KeyboardInterrupt):
        stop(signal.SIGINT)  # a person's second Ctrl-C


def test_launcher_stop_handles_the_signals_only_inside_its_block(tmp_path, monkeypatch):
    from gmiexp import signals

    monkeypatch.delenv(signals.STOP_FILE_ENV, raising=False)
    before = signal.getsignal(signal.SIGINT)
    stop = signals.LauncherStop(tmp_path / "stop")
    with stop.installed():
        assert os.environ[signals.STOP_FILE_ENV] == str(tmp_path / "stop")
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stop.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGINT) is before and signals.STOP_FILE_ENV not in os.environ
