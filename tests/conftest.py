"""Root conftest: makes tests/helpers importable; the no-orphans and run-tag fixtures."""

from __future__ import annotations

import os
import sys
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
