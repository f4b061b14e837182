import multiprocessing as mp
import os
import signal
import stat

import _workers
import pytest

from gmiexp.comm.channels import segment
from gmiexp.comm.channels.ring import SlotRing


def test_segment_is_owner_only_and_unlinked_at_close(tag):
    seg = segment.create(segment.segment_name("perm", tag), 4096)
    mode = stat.S_IMODE(os.stat(seg.path).st_mode)
    assert mode == 0o600
    assert segment.leftovers(tag) == [seg.name]
    seg.close()
    assert segment.leftovers(tag) == []


def test_ring_segment_permissions(tag):
    ring = SlotRing.create("r", 2, 64, tag=tag)
    assert stat.S_IMODE(os.stat(segment.SHM_DIR / ring.spec.name).st_mode) == 0o600
    ring.close()


def test_cleanup_run_removes_only_this_runs_segments(tag):
    mine = segment.create(segment.segment_name("a", tag), 64)
    other = segment.create(segment.segment_name("a", tag + "x"), 64)
    try:
        assert segment.cleanup_run(tag) == [mine.name]
        assert segment.leftovers(tag + "x") == [other.name]
    finally:
        other.close()
        mine.close()


def test_bad_tag_rejected():
    with pytest.raises(ValueError, match="run tag"):
        segment.run_tag("../etc")


def _create_and_exit(tag: str) -> None:
    segment.create(segment.segment_name("exit", tag), 64)  # never closed: atexit must unlink


def test_segment_unlinked_at_normal_exit(tag):
    p = mp.get_context("spawn").Process(target=_create_and_exit, args=(tag,))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert segment.leftovers(tag) == []


def test_sigkill_before_attach_leaves_segment_that_cleanup_run_removes(tag):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_workers.create_ring_then_put, args=(tag, 4, 1, q))
    p.start()
    q.get(timeout=60)
    assert q.get(timeout=60) == "published"
    os.kill(p.pid, signal.SIGKILL)
    p.join(30)
    assert len(segment.leftovers(tag)) == 1  # nobody attached or sealed: the launcher's job
    segment.cleanup_run(tag)
    assert segment.leftovers(tag) == []
