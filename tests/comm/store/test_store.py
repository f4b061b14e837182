import multiprocessing as mp
import os
import stat

import pytest
import torch

from gmiexp.comm.channels import FieldSpec
from gmiexp.comm.store import ExperienceStore, NotEnoughRows, StoreFull
from gmiexp.errors import ConfigError
from gmiexp.shm.names import SHM_DIR

FIELDS = [FieldSpec("obs", (3,)), FieldSpec("rew"), FieldSpec("done", (), torch.bool)]


def rows(start: int, n: int) -> dict[str, torch.Tensor]:
    r = torch.arange(start, start + n, dtype=torch.float32)
    return {"obs": r[:, None].repeat(1, 3), "rew": r, "done": r.long() % 2 == 0}


@pytest.fixture
def store(tag):
    s = ExperienceStore.create(FIELDS, 8, tag=tag)
    yield s
    s.close()


def test_insert_gather_and_zero_copy_view(store):
    idx = store.insert(rows(0, 5))
    got = store.gather(idx)
    assert torch.equal(got["rew"], torch.arange(5.0)) and torch.equal(got["obs"][:, 2], torch.arange(5.0))
    v = store.view("rew", int(idx[2]))
    v.fill_(42.0)  # writes through to shared memory
    assert float(store.gather(idx[2:3])["rew"][0]) == 42.0


def test_allocate_write_in_place_then_commit(store):
    buf = store.allocate(2)
    buf.row("obs", 0).copy_(torch.tensor([1.0, 2.0, 3.0]))
    buf.write({"rew": torch.tensor([5.0, 6.0])})
    assert store.size == 0  # not selectable before commit
    store.commit(buf)
    assert store.size == 2
    assert store.gather(store.sample(1, "fifo"))["obs"].tolist() == [[1.0, 2.0, 3.0]]


@pytest.mark.parametrize(("eviction", "kept"), [("fifo", list(range(4, 12))), ("lifo", [*range(7), 11])])
def test_eviction(tag, eviction, kept):
    s = ExperienceStore.create(FIELDS, 8, eviction=eviction, tag=tag)
    try:
        for k in range(12):
            s.insert(rows(k, 1))
        assert sorted(s.gather(s.index.ready())["rew"].long().tolist()) == kept
    finally:
        s.close()


def test_release_and_store_full(store):
    idx = store.insert(rows(0, 8))
    store.release(idx[:3])
    assert store.size == 5
    store.allocate(3)  # the 3 freed rows, now being written
    store.allocate(5)  # evicts the 5 ready ones
    with pytest.raises(StoreFull):
        store.allocate(1)


def test_selection_strategies(store):
    store.insert(rows(0, 6), priority=torch.tensor([0.0, 1.0, 5.0, 0.0, 3.0, 0.0]))
    rew = lambda i: store.gather(i)["rew"].long().tolist()  # noqa: E731
    assert rew(store.sample(3, "fifo")) == [0, 1, 2]
    assert rew(store.sample(2, "lifo")) == [5, 4]
    assert rew(store.sample(2, "topk")) == [2, 4]
    g = torch.Generator().manual_seed(0)
    prio = [r for _ in range(250) for r in rew(store.sample(8, "prioritized", g))]
    assert set(prio) == {1, 2, 4}
    assert abs(prio.count(2) / 2000 - 5 / 9) < 0.05
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(store.sample(8, "uniform", g1), store.sample(8, "uniform", g2))
    assert {r for _ in range(100) for r in rew(store.sample(8, "uniform", g1))} == set(range(6))
    with pytest.raises(NotEnoughRows):
        store.sample(7, "topk")


def test_update_priorities(store):
    idx = store.insert(rows(0, 3))
    store.update_priorities(idx[:1], 10.0)
    assert store.gather(store.sample(1, "topk"))["rew"].tolist() == [0.0]


def test_bad_input_is_config_error(tag, store):
    with pytest.raises(ConfigError, match=r"batch size: 9; valid: 1\.\.8"):
        store.sample(9)
    with pytest.raises(ConfigError, match="store field: 'logits'; valid: obs, rew, done"):
        store.gather(torch.tensor([0]), ["logits"])
    with pytest.raises(ConfigError, match="store field"):
        store.insert({**rows(0, 1), "logits": torch.zeros(1)})
    with pytest.raises(ConfigError, match="selection strategy"):
        store.sample(1, "newest")
    with pytest.raises(ConfigError, match="store capacity: 0"):
        ExperienceStore.create(FIELDS, 0, tag=tag)
    with pytest.raises(ConfigError, match="eviction"):
        ExperienceStore.create(FIELDS, 4, eviction="random", tag=tag)


def test_segments_owner_only(store):
    for t in store.tables.values():
        assert stat.S_IMODE(os.stat(SHM_DIR / t.seg.name).st_mode) == 0o600


def _child_insert(store: ExperienceStore, start: int) -> None:
    store.insert(rows(start, 4))


def test_other_process_inserts_parent_reads(store):
    p = mp.get_context("spawn").Process(target=_child_insert, args=(store, 100))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert sorted(store.gather(store.index.ready())["rew"].long().tolist()) == [100, 101, 102, 103]


def test_threads_insert_concurrently(store):
    import threading

    ths = [threading.Thread(target=_child_insert, args=(store, 10 * i)) for i in range(2)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert sorted(store.gather(store.index.ready())["rew"].long().tolist()) == [0, 1, 2, 3, 10, 11, 12, 13]
