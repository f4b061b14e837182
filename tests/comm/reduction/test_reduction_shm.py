"""The shared-memory engine: permissions, cleanup, size agreement, time-outs, dead peers."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch
from reduction_helpers import new_tag, shm_leftovers

from gmiexp.comm.reduction.shm import ReductionTimeout, ShmArena, chunk_bounds


def open_threads(name, n, timeout_s=10.0):
    arenas = [None] * n
    arenas[0] = ShmArena.create(name, n, timeout_s)
    for i in range(1, n):
        arenas[i] = ShmArena.attach(name, n, i, timeout_s)
    ts = [threading.Thread(target=a.join) for a in arenas]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    return arenas


def in_threads(fns):
    out, errs = {}, {}

    def wrap(i, f):
        try:
            out[i] = f()
        except BaseException as e:
            errs[i] = e

    ts = [threading.Thread(target=wrap, args=(i, f), daemon=True) for i, f in enumerate(fns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not any(t.is_alive() for t in ts)
    return out, errs


def test_chunk_bounds_cover_and_align():
    for numel in (0, 1, 15, 16, 17, 1000, 1_000_003):
        for n in range(1, 17):
            b = chunk_bounds(numel, n)
            assert b[0] == 0 and b[-1] == numel and len(b) == n + 1
            assert all(x <= y for x, y in zip(b[:-1], b[1:], strict=True))
            assert all(x % 16 == 0 or x == numel for x in b[:-1])


def test_segments_are_owner_only_and_gone_after_join_and_close():
    tag = new_tag()
    a0 = ShmArena.create(f"gmiexp_{tag}_x", 2)
    assert a0.header.mode == 0o600
    assert os.stat(f"/dev/shm/gmiexp_{tag}_x").st_mode & 0o777 == 0o600
    assert shm_leftovers(tag) == [f"gmiexp_{tag}_x"]
    a1 = ShmArena.attach(f"gmiexp_{tag}_x", 2, 1)
    in_threads([a0.join, a1.join])
    assert shm_leftovers(tag) == []  # unlinked once everyone mapped it
    xs = [torch.ones(5000), torch.full((5000,), 2.0)]
    pair = [a0, a1]
    _, errs = in_threads([lambda i=i: pair[i].allreduce(xs[i]) for i in range(2)])
    assert not errs
    assert a0.data is not None and a0.data.mode == 0o600
    assert torch.equal(xs[0], torch.full((5000,), 3.0)) and torch.equal(xs[1], xs[0])
    assert shm_leftovers(tag) == []
    a0.close()
    a1.close()
    assert shm_leftovers(tag) == []


def test_grows_and_handles_sizes_and_dtypes():
    tag = new_tag()
    arenas = open_threads(f"gmiexp_{tag}_g", 3)
    for numel in (1, 17, 100_000, 5, 1_000_003):
        xs = [torch.arange(numel, dtype=torch.float64) * (i + 1) for i in range(3)]
        _, errs = in_threads([lambda i=i, xs=xs: arenas[i].allreduce(xs[i], divisor=3) for i in range(3)])
        assert not errs, errs
        ref = torch.arange(numel, dtype=torch.float64) * 2
        for x in xs:
            assert x.dtype == torch.float64 and torch.allclose(x, ref, rtol=1e-6)
            assert torch.equal(x, xs[0])
    for a in arenas:
        a.close()
    assert shm_leftovers(tag) == []


def test_members_disagreeing_on_size_fail_clearly():
    tag = new_tag()
    arenas = open_threads(f"gmiexp_{tag}_m", 2)
    xs = [torch.ones(10), torch.ones(12)]
    _, errs = in_threads([lambda i=i: arenas[i].allreduce(xs[i]) for i in range(2)])
    assert set(errs) == {0, 1}
    assert all("different sizes: [10, 12]" in str(e) for e in errs.values())
    for a in arenas:
        a.close()


def test_a_member_that_never_arrives_times_out():
    tag = new_tag()
    arenas = open_threads(f"gmiexp_{tag}_t", 3, timeout_s=0.5)
    t0 = time.monotonic()
    _, errs = in_threads([lambda i=i: arenas[i].allreduce(torch.ones(100)) for i in range(2)])  # member 2 absent
    took = time.monotonic() - t0
    assert set(errs) == {0, 1} and all(isinstance(e, ReductionTimeout) for e in errs.values())
    assert any("member(s) [2]" in str(e) and "within 0.5 s" in str(e) for e in errs.values())
    assert took < 5
    for a in arenas:
        a.close()


CHILD = textwrap.dedent(
    """
    import os, signal, sys, torch
    from gmiexp.comm.reduction.shm import ShmArena
    name, mode = sys.argv[1], sys.argv[2]
    if mode == "creator-crash":
        ShmArena.create(name, 2)
        raise SystemExit(3)  # crashes before the peer attached: atexit must unlink
    a = ShmArena.attach(name, 2, 1, timeout_s=30)
    a.join()
    a.allreduce(torch.ones(1000))
    os.kill(os.getpid(), signal.SIGKILL)  # dies before the second reduction
    """
)


def child(name, mode):
    return subprocess.Popen([sys.executable, "-c", CHILD, name, mode])


def test_peer_killed_mid_run_fails_the_others_fast_and_leaves_nothing():
    tag = new_tag()
    name = f"gmiexp_{tag}_k"
    a = ShmArena.create(name, 2, timeout_s=30)
    p = child(name, "peer-dies")
    try:
        a.join()
        x = torch.ones(1000)
        a.allreduce(x)
        assert torch.equal(x, torch.full((1000,), 2.0))
        t0 = time.monotonic()
        with pytest.raises(ReductionTimeout, match="died during a reduction"):
            a.allreduce(torch.ones(1000))
        assert time.monotonic() - t0 < 2.0  # far below the 30 s timeout
        assert p.wait(10) == -signal.SIGKILL
    finally:
        p.kill()
        p.wait()
        a.close()
    assert shm_leftovers(tag) == []


def test_creator_crashing_before_peers_attach_unlinks_at_exit():
    tag = new_tag()
    p = child(f"gmiexp_{tag}_c", "creator-crash")
    assert p.wait(60) == 3
    assert shm_leftovers(tag) == []


def test_stale_segment_of_same_name_is_replaced():
    tag = new_tag()
    name = f"gmiexp_{tag}_s"
    stale = ShmArena.create(name, 3)
    stale.header.owner = False  # forget it, as a crashed run would
    fresh = ShmArena.create(name, 2)
    peer = ShmArena.attach(name, 2, 1)
    assert peer.n == 2
    in_threads([fresh.join, peer.join])
    for a in (stale, fresh, peer):
        a.close()
    assert shm_leftovers(tag) == []


def test_reducing_in_the_shared_buffer_skips_the_copy_and_is_correct():
    tag = new_tag()
    arenas = open_threads(f"gmiexp_{tag}_b", 3)
    bufs, _ = in_threads([lambda i=i: arenas[i].buffer(40_000) for i in range(3)])
    assert bufs[0].data_ptr() == arenas[0]._slots[0].ctypes.data
    for step in range(3):
        for i in range(3):
            bufs[i].copy_(torch.arange(40_000, dtype=torch.float32) * (i + step))
        _, errs = in_threads([lambda i=i: arenas[i].allreduce(bufs[i], divisor=3) for i in range(3)])
        assert not errs, errs
        ref = torch.arange(40_000, dtype=torch.float64) * (1 + step)
        for b in bufs.values():
            assert torch.equal(b, bufs[0]) and torch.allclose(b.double(), ref, rtol=1e-6)
    for a in arenas:
        a.close()
    assert shm_leftovers(tag) == []
