"""Root conftest: makes tests/helpers importable; the no-orphans, run-tag and private-tmp fixtures."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

from gmitest import gmiexp_workers  # noqa: E402

from gmiexp.shm.cleanup import cleanup_run, leftovers  # noqa: E402


@pytest.fixture
def no_orphans(tmp_path: Path) -> Iterator[None]:
    """Fail the test if any GMI of a run under ``tmp_path`` outlives it."""
    yield
    left = gmiexp_workers(tmp_path)
    for p in left:
        p.kill()
    assert not left, f"orphan GMI workers left behind: {[p.pid for p in left]}"


@pytest.fixture
def tag() -> Iterator[str]:
    """A fresh shared-memory run tag; the test fails if it leaves a segment behind (and the fixture cleans it)."""
    t = f"t{os.getpid()}-{uuid.uuid4().hex[:6]}"
    yield t
    left = leftovers(t)
    cleanup_run(t)
    assert not left, f"segments left in /dev/shm: {left}"


@pytest.fixture(scope="session")
def private_tmp_root() -> Iterator[Path]:
    """Where :func:`private_tmp` dirs go, removed at the end of the session (a library that cached a test's temp
    dir, such as torch's compile cache, may write there after the test)."""
    d = Path(tempfile.mkdtemp(prefix="gx", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def private_tmp(private_tmp_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A short temp dir of this test's own as ``TMPDIR`` (and :func:`tempfile.gettempdir`).

    What gmiexp keeps outside a run dir (an MPS daemon's pipes when the run dir's path is too long for a
    socket, the shared daemon's directory) goes there, so tests running side by side (pytest-xdist) do
    not meet each other's daemons; short, because pytest-xdist's ``tmp_path`` is longer than a pipe path may be.
    """
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir  # late: most tests never need torch here

    d = Path(tempfile.mkdtemp(dir=private_tmp_root))
    # torch computes its compile cache from the temp dir once and exports it (TORCHINDUCTOR_CACHE_DIR):
    # pin it to the usual place, so neither this process nor the runs a later test starts write under ``d``
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())
    monkeypatch.setenv("TMPDIR", str(d))
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d
