"""Child-process bodies for the multi-process channel tests (importable under spawn)."""

import os
import time

import torch

from gmiexp.comm.channels import Dispenser, Migrator, SlotRing
from gmiexp.shm.names import run_tag


def code(seq: int) -> int:
    return (seq * 2654435761 + 12345) % (1 << 61)


def payload(seq: int) -> torch.Tensor:
    return torch.tensor([seq, code(seq)], dtype=torch.int64)


def produce(ring: SlotRing, n: int, out) -> None:
    """Send n sequence-coded items, then report the checksum of what was sent."""
    total = 0
    buf = torch.empty(2, dtype=torch.int64)
    for i in range(n):
        buf[0], buf[1] = i, code(i)
        ring.put(buf)
        total = (total + code(i)) % (1 << 61)
    ring.close_writer()
    out.put(("sent", n, total))


def consume_slowly(ring: SlotRing, n: int, every: int, pause_s: float, out) -> None:
    """Check seq/checksum of every item; pause every ``every`` items (a deliberately slow trainer)."""
    total, bad, dup_or_gap = 0, 0, 0
    for i in range(n):
        it = ring.recv(timeout=60)
        seq, c = int(it.data[0]), int(it.data[1])
        if it.seq != i or seq != i:
            dup_or_gap += 1
        if c != code(seq):
            bad += 1
        total = (total + c) % (1 << 61)
        ring.release()
        if every and i % every == every - 1:
            time.sleep(pause_s)
    out.put(("got", n, total, bad, dup_or_gap))


def create_ring_then_put(tag: str, n_slots: int, n_items: int, out) -> None:
    """Create a ring as producer, hand its spec to the parent, publish items, then wait to be killed."""
    os.environ["GMIEXP_RUN_TAG"] = run_tag(tag)
    ring = SlotRing.create("owned", n_slots, 64)
    out.put(ring.spec)
    for i in range(n_items):
        ring.put(payload(i))
    out.put("published")
    time.sleep(600)


def attach_and_hold(spec, out) -> None:
    """Attach as consumer, read one item, then hang until killed."""
    ring = SlotRing.attach(spec, seal=False)
    it = ring.recv_copy(timeout=30)
    out.put(int(it.data[0]))
    time.sleep(600)


def dispense(channels, batches: list[dict], out) -> None:
    """An agent: dispense every batch through the channel set, then close."""
    d = Dispenser(channels.fields, Migrator.single(channels))
    for b in batches:
        d.dispense(b)
    d.close()
    out.put("done")
