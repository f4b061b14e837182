"""Cross-process reliability: no loss or duplicates, bounded memory, survival and cleanup."""

import multiprocessing as mp
import os
import signal
import time

import _workers
import pytest
import torch

from gmiexp.comm.channels import ChannelClosed, SlotRing
from gmiexp.shm.cleanup import leftovers
from gmiexp.shm.wait import PeerDied

CTX = mp.get_context("spawn")


def _run_transfer(tag: str, n: int, every: int, pause_s: float) -> None:
    ring = SlotRing.create("rel", 64, 16, tag=tag)
    q = CTX.Queue()
    prod = CTX.Process(target=_workers.produce, args=(ring, n, q))
    cons = CTX.Process(target=_workers.consume_slowly, args=(ring, n, every, pause_s, q))
    try:
        cons.start()
        prod.start()
        msgs = {m[0]: m for m in (q.get(timeout=300), q.get(timeout=300))}
    finally:
        for p in (prod, cons):
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join()
        ring.close()
    _, n_sent, sent_sum = msgs["sent"]
    _, n_got, got_sum, bad, dup_or_gap = msgs["got"]
    assert (n_sent, n_got) == (n, n)
    assert bad == 0 and dup_or_gap == 0
    assert got_sum == sent_sum


def test_1e5_transfers_slow_consumer_no_loss_no_dup(tag):
    _run_transfer(tag, 100_000, every=5_000, pause_s=0.02)


@pytest.mark.slow
def test_1e6_transfers_slow_consumer_no_loss_no_dup(tag):
    _run_transfer(tag, 1_000_000, every=20_000, pause_s=0.02)


def test_delivered_data_survives_producer_sigkill_and_nothing_left(tag):
    q = CTX.Queue()
    prod = CTX.Process(target=_workers.create_ring_then_put, args=(tag, 8, 5, q))
    prod.start()
    try:
        spec = q.get(timeout=60)
        ring = SlotRing.attach(spec, seal=True)  # consumer seals: no name left to leak
        assert q.get(timeout=60) == "published"
        assert leftovers(tag) == []
        os.kill(prod.pid, signal.SIGKILL)
        prod.join(30)
        assert [int(ring.recv_copy().data[0]) for _ in range(5)] == [0, 1, 2, 3, 4]
        with pytest.raises(PeerDied):
            ring.recv(timeout=5)
        ring.close()
    finally:
        if prod.is_alive():
            prod.kill()
            prod.join()
    assert leftovers(tag) == []


def test_consumer_sigkill_unblocks_producer_and_nothing_left(tag):
    ring = SlotRing.create("ck", 2, 64, tag=tag)
    q = CTX.Queue()
    cons = CTX.Process(target=_workers.attach_and_hold, args=(ring.spec, q))
    cons.start()
    try:
        ring.put(_workers.payload(0))
        assert q.get(timeout=60) == 0
        ring.seal()
        assert leftovers(tag) == []
        ring.put(_workers.payload(1))
        ring.put(_workers.payload(2))
        os.kill(cons.pid, signal.SIGKILL)
        cons.join(30)
        t0 = time.monotonic()
        with pytest.raises(PeerDied):
            ring.put(_workers.payload(3), timeout=10)
        assert time.monotonic() - t0 < 5
    finally:
        if cons.is_alive():
            cons.kill()
            cons.join()
        ring.close()
    assert leftovers(tag) == []


def test_delivered_data_survives_producer_normal_exit(tag):
    ring = SlotRing.create("exit", 16, 16, tag=tag)
    q = CTX.Queue()
    prod = CTX.Process(target=_workers.produce, args=(ring, 10, q))
    prod.start()
    prod.join(60)
    assert prod.exitcode == 0
    got = [int(ring.recv_copy().data[0]) for _ in range(10)]
    assert got == list(range(10))
    with pytest.raises(ChannelClosed):
        ring.recv(timeout=1)
    ring.close()
    assert leftovers(tag) == []


def test_tensor_view_survives_ring_close(tag):
    ring = SlotRing.create("v", 2, 64, tag=tag)
    ring.put(torch.arange(4))
    view = ring.recv().data
    ring.close()  # name gone, mapping kept alive by the view
    assert leftovers(tag) == []
    assert view.tolist() == [0, 1, 2, 3]
