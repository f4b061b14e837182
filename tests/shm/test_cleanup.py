"""Removing a run's segments by tag (the sweep of dead launchers' runs: tests/launch/test_lifeline.py)."""

from gmiexp.shm import segment
from gmiexp.shm.cleanup import cleanup_run, leftovers
from gmiexp.shm.names import segment_name


def test_cleanup_run_removes_only_this_runs_segments(tag):
    mine = segment.create(segment_name("a", tag), 64)
    other = segment.create(segment_name("a", tag + "x"), 64)
    try:
        assert cleanup_run(tag) == [mine.name]
        assert leftovers(tag + "x") == [other.name]
    finally:
        other.close()
        mine.close()
