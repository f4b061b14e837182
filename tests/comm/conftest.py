"""Shared by the channel and store tests: a fresh run tag per test, with a leftover-segment check."""

import os
import uuid

import pytest

from gmiexp.comm.channels.segment import cleanup_run, leftovers


@pytest.fixture
def tag():
    """A fresh run tag; the test fails if it leaves a segment behind (and the fixture cleans it)."""
    t = f"t{os.getpid()}-{uuid.uuid4().hex[:6]}"
    yield t
    left = leftovers(t)
    cleanup_run(t)
    assert not left, f"segments left in /dev/shm: {left}"
