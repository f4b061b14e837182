"""Segments: owner-only, unlinked once at close or exit, stale names replaced only when asked."""

import multiprocessing as mp
import os
import stat

import pytest

from gmiexp.shm import segment
from gmiexp.shm.cleanup import leftovers
from gmiexp.shm.names import segment_name


def test_segment_is_owner_only_and_unlinked_at_close(tag):
    seg = segment.create(segment_name("perm", tag), 4096)
    assert stat.S_IMODE(os.stat(seg.path).st_mode) == 0o600 == seg.mode
    assert leftovers(tag) == [seg.name]
    seg.close()
    assert leftovers(tag) == []


def test_attach_sees_the_same_bytes_and_does_not_unlink_at_close(tag):
    seg = segment.create(segment_name("peer", tag), 64)
    peer = segment.attach(seg.name)
    assert (peer.size, peer.mode, peer.owner) == (64, 0o600, False)
    seg.buf[3] = 7
    assert peer.buf[3] == 7
    peer.close()
    assert leftovers(tag) == [seg.name]
    seg.close()
    assert leftovers(tag) == []


def test_existing_name_is_an_error_unless_replaced(tag):
    name = segment_name("same", tag, unique=False)
    stale = segment.create(name, 64)
    stale.owner = False  # forget it, as a crashed run would
    with pytest.raises(FileExistsError):
        segment.create(name, 64)
    fresh = segment.create(name, 128, replace=True)
    assert segment.attach(name).size == 128
    stale.close()
    assert leftovers(tag) == [name]  # the stale one's close must not touch the fresh segment
    fresh.close()


def test_unlink_happens_once(tag):
    name = segment_name("once", tag, unique=False)
    first = segment.create(name, 64)
    first.unlink()
    second = segment.create(name, 64)  # a later segment of the same name is not the first one's
    first.unlink()
    first.close()
    assert leftovers(tag) == [name]
    second.close()


def test_unmap_is_refused_while_a_memoryview_exports_the_buffer(tag):
    seg = segment.create(segment_name("views", tag), 64)
    view = memoryview(seg.buf)
    seg.close(unmap=True)
    view[0] = 1  # still mapped
    view.release()
    seg.close(unmap=True)
    assert seg.buf.closed
    seg.close()  # again: a no-op


def _create_and_exit(tag: str) -> None:
    segment.create(segment_name("exit", tag), 64)  # never closed: atexit must unlink


def test_segment_unlinked_at_normal_exit(tag):
    p = mp.get_context("spawn").Process(target=_create_and_exit, args=(tag,))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert leftovers(tag) == []
