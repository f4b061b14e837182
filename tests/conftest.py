"""Root conftest: makes tests/helpers importable and provides the no-orphans fixture."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

from gmitest import gmiexp_workers  # noqa: E402


@pytest.fixture
def no_orphans(tmp_path: Path) -> Iterator[None]:
    """Fail the test if any GMI of a run under ``tmp_path`` outlives it."""
    yield
    left = gmiexp_workers(tmp_path)
    for p in left:
        p.kill()
    assert not left, f"orphan GMI workers left behind: {[p.pid for p in left]}"
