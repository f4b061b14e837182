import threading

import pytest
import torch

from gmiexp.comm.channels import ChannelClosed, SlotRing
from gmiexp.errors import ConfigError
from gmiexp.shm.wait import Backoff

FAST = Backoff(spin=10, min_sleep_s=1e-6, max_sleep_s=1e-4)


@pytest.fixture
def ring(tag):
    r = SlotRing.create("ring", 4, 256, tag=tag, backoff=FAST)
    yield r
    r.close()


@pytest.mark.parametrize(
    "t",
    [
        torch.arange(12, dtype=torch.float32).reshape(3, 4),
        torch.tensor([True, False, True]),
        torch.arange(6, dtype=torch.int16).reshape(1, 2, 3),
        torch.tensor(3.5, dtype=torch.float64),
        torch.arange(8, dtype=torch.bfloat16).reshape(2, 2, 2)[:, 0],  # non-contiguous
    ],
)
def test_roundtrip_keeps_dtype_shape_values(ring, t):
    assert ring.put(t, tag=5, row0=9)
    item = ring.recv()
    assert (item.tag, item.row0, item.seq) == (5, 9, 0)
    assert item.data.dtype == t.dtype and item.data.shape == t.shape
    assert torch.equal(item.data, t)
    ring.release()


def test_sequence_numbers_and_zero_copy_view(ring):
    for i in range(10):
        ring.put(torch.tensor([i]))
        item = ring.recv()
        assert item.seq == i and int(item.data[0]) == i
        slot = ring._data[i % ring.n_slots]
        slot[:8].view(torch.int64)[0] = 100 + i  # the view aliases the slot in shared memory
        assert int(item.data[0]) == 100 + i
        ring.release()


def test_block_when_full_bounds_memory(ring):
    for i in range(ring.n_slots):
        ring.put(torch.tensor([i]))
    assert ring.occupancy == ring.n_slots
    with pytest.raises(TimeoutError):
        ring.put(torch.tensor([99]), timeout=0.05)
    assert ring.recv_copy().seq == 0
    assert ring.put(torch.tensor([99]), timeout=1)


def test_drop_mode_counts_drops_and_leaves_seq_gaps(tag):
    ring = SlotRing.create("drop", 2, 64, tag=tag, on_full="drop")
    try:
        sent = [ring.put(torch.tensor([i])) for i in range(5)]
        assert sent == [True, True, False, False, False]
        assert ring.dropped == 3
        assert [ring.recv_copy().seq for _ in range(2)] == [0, 1]
        assert ring.put(torch.tensor([5]))
        assert ring.recv_copy().seq == 5  # consumer sees the gap of 3 drops
    finally:
        ring.close()


def test_oversized_item_is_config_error(ring):
    with pytest.raises(ConfigError, match="slot_bytes=256"):
        ring.put(torch.zeros(65))


def test_bad_ring_config(tag):
    with pytest.raises(ConfigError, match="n_slots"):
        SlotRing.create("x", 0, 64, tag=tag)
    with pytest.raises(ConfigError, match="on_full"):
        SlotRing.create("x", 1, 64, tag=tag, on_full="spill")


def test_close_writer_ends_stream_after_drain(ring):
    ring.put(torch.tensor([1]))
    ring.close_writer()
    assert ring.recv_copy().seq == 0
    with pytest.raises(ChannelClosed):
        ring.recv(timeout=1)


def test_release_more_than_held_is_an_error(ring):
    with pytest.raises(RuntimeError, match="held"):
        ring.release()


def test_threads_no_loss_no_duplicates(ring):
    """Producer thread and consumer in-process: sequence and checksum over 20k items."""
    n = 20_000

    def produce():
        for i in range(n):
            ring.put(torch.tensor([i, i * 7 + 1]))
        ring.close_writer()

    th = threading.Thread(target=produce)
    th.start()
    got = []
    while True:
        try:
            it = ring.recv(timeout=30)
        except ChannelClosed:
            break
        assert int(it.data[1]) == int(it.data[0]) * 7 + 1
        got.append((it.seq, int(it.data[0])))
        ring.release()
    th.join()
    assert got == [(i, i) for i in range(n)]
