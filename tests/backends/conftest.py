import os
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = str(Path(__file__).resolve().parents[1])
if TESTS not in sys.path:  # tests/fakes is shared by tests/backends and tests/test_*.py
    sys.path.insert(0, TESTS)

from fakes import mps as fake_mps_mod  # noqa: E402


@pytest.fixture
def fake_mps(tmp_path, monkeypatch, private_tmp):
    """The fake control binary on PATH; fails the test if a daemon outlives it."""
    from gmiexp.backends import mps_daemon

    monkeypatch.setattr(mps_daemon, "START_TIMEOUT_S", 1.0)
    monkeypatch.setattr(mps_daemon, "QUIT_TIMEOUT_S", 1.0)
    fake = fake_mps_mod.install(tmp_path, monkeypatch)
    yield fake
    owned = Path(tempfile.gettempdir()).glob(f"gmiexp-mps-{os.getuid()}-*")
    left = fake_mps_mod.live_daemons(tmp_path, *owned)
    fake_mps_mod.kill(left)
    assert not left, f"MPS daemons left running: {left}"
