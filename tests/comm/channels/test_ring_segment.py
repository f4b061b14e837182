"""A ring's segment: owner-only, and a producer killed before anyone attached leaves one for cleanup_run."""

import multiprocessing as mp
import os
import signal
import stat

import _workers

from gmiexp.comm.channels.ring import SlotRing
from gmiexp.shm.cleanup import cleanup_run, leftovers
from gmiexp.shm.names import SHM_DIR


def test_ring_segment_permissions(tag):
    ring = SlotRing.create("r", 2, 64, tag=tag)
    assert stat.S_IMODE(os.stat(SHM_DIR / ring.spec.name).st_mode) == 0o600
    ring.close()


def test_sigkill_before_attach_leaves_segment_that_cleanup_run_removes(tag):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_workers.create_ring_then_put, args=(tag, 4, 1, q))
    p.start()
    q.get(timeout=60)
    assert q.get(timeout=60) == "published"
    os.kill(p.pid, signal.SIGKILL)
    p.join(30)
    assert len(leftovers(tag)) == 1  # nobody attached or sealed: the launcher's job
    cleanup_run(tag)
    assert leftovers(tag) == []
