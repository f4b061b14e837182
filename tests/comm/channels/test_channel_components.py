import math
import multiprocessing as mp

import _workers
import pytest
import torch

from gmiexp.comm.channels import (
    Batcher,
    ChannelClosed,
    Compressor,
    Dispenser,
    FieldSpec,
    Migrator,
    PinnedStaging,
    Route,
    SlotRing,
    make_channel_set,
)
from gmiexp.errors import ConfigError
from gmiexp.shm.ring_layout import aligned_rows

FIELDS = [FieldSpec("obs", (4,)), FieldSpec("actions", (2,)), FieldSpec("rewards"), FieldSpec("dones", (), torch.bool)]


def exp(steps: int, envs: int, start: int = 0) -> dict[str, torch.Tensor]:
    rows = torch.arange(start, start + steps * envs, dtype=torch.float32).reshape(steps, envs)
    return {
        "obs": rows[..., None].repeat(1, 1, 4) + torch.arange(4) / 10,
        "actions": rows[..., None].repeat(1, 1, 2) * -1,
        "rewards": rows * 2,
        "dones": (rows.long() % 3 == 0),
    }


def check_rows(batch: dict, first: int) -> None:
    n = batch["obs"].shape[0]
    rows = torch.arange(first, first + n, dtype=torch.float32)
    assert torch.equal(batch["obs"][:, 0], rows)
    assert torch.equal(batch["actions"][:, 1], -rows)
    assert torch.equal(batch["rewards"], rows * 2)
    assert torch.equal(batch["dones"], rows.long() % 3 == 0)


def test_compressor_packs_small_pieces_and_splits_large(tag):
    ring = SlotRing.create("c", 16, 64, tag=tag)
    try:
        c = Compressor(ring, FieldSpec("x", (2,)), target_bytes=40)  # 5 rows of 8 bytes per transfer
        for i in range(3):
            c.push(torch.full((2, 2), float(i)))  # 3 pieces of 2 rows -> one transfer of 5 + pending 1
        c.push(torch.zeros(7, 2))  # large piece split
        c.flush()
        sizes = []
        while ring.poll():
            it = ring.recv_copy()
            sizes.append((it.row0, it.data.shape[0]))
        assert sizes == [(0, 5), (5, 5), (10, 3)]
        assert c.row == 13
    finally:
        ring.close()


def test_compressor_target_must_fit_slot(tag):
    ring = SlotRing.create("c", 2, 64, tag=tag)
    try:
        with pytest.raises(ConfigError, match="8..64"):
            Compressor(ring, FieldSpec("x", (2,)), target_bytes=128)
    finally:
        ring.close()


@pytest.mark.parametrize("mode", ["multi", "uni"])
@pytest.mark.parametrize("batch_size", [3, 7, 40])  # slicing and stacking
def test_pipeline_in_process_keeps_rows_aligned(tag, mode, batch_size):
    cs = make_channel_set(mode, FIELDS, rows_per_step=4, target_bytes=64, n_slots=64, tag=tag)
    try:
        d = Dispenser(FIELDS, Migrator.single(cs))
        b = Batcher([cs], batch_size)
        for k in range(5):
            d.dispense(exp(3, 4, start=12 * k))
        d.close()
        seen = 0
        for batch in b:
            check_rows(batch, seen)
            seen += batch["obs"].shape[0]
        assert seen == 60
    finally:
        cs.close()


def test_zero_copy_batches_are_views_valid_until_next_call(tag):
    cs = make_channel_set("multi", FIELDS, rows_per_step=4, target_bytes=16 * 8, n_slots=8, tag=tag)
    try:
        d = Dispenser(FIELDS, Migrator.single(cs))
        d.dispense(exp(4, 4))
        cs.flush()
        b = Batcher([cs], 8, zero_copy=True)
        first = b.next_batch(timeout=5)
        ring_ptr = cs.rings[0].recv.__self__._data[0].data_ptr()
        assert first["obs"].data_ptr() == ring_ptr  # a view into the slot, not a copy
        check_rows(first, 0)
        check_rows(b.next_batch(timeout=5), 8)
    finally:
        cs.close()


def test_batcher_stacks_rows_from_several_agents(tag):
    a = make_channel_set("multi", FIELDS, rows_per_step=2, target_bytes=64, n_slots=16, name="a", tag=tag)
    c = make_channel_set("uni", FIELDS, rows_per_step=2, target_bytes=64, n_slots=16, name="b", tag=tag)
    try:
        for cs, start in ((a, 0), (c, 1000)):
            d = Dispenser(FIELDS, Migrator.single(cs))
            d.dispense(exp(3, 2, start))
            d.close()
        batches = list(Batcher([a, c], 4))
        rows = sorted(int(r) for bt in batches for r in bt["obs"][:, 0])
        assert rows == [0, 1, 2, 3, 4, 5, 1000, 1001, 1002, 1003, 1004, 1005]
        for bt in batches:
            assert torch.equal(bt["rewards"], bt["obs"][:, 0] * 2)
    finally:
        a.close()
        c.close()


def test_drop_mode_counts_and_batcher_realigns(tag):
    cs = make_channel_set("multi", FIELDS, rows_per_step=2, target_bytes=32, n_slots=2, tag=tag, on_full="drop")
    try:
        d = Dispenser(FIELDS, Migrator([Route(0, 1, cs)], device=0, gather_batches=1))
        for k in range(6):
            d.dispense(exp(1, 2, 2 * k))
        assert cs.dropped_rows > 0 and all(r.dropped > 0 for r in cs.rings)
        d.close()
        for bt in Batcher([cs], 2):
            assert torch.equal(bt["rewards"], bt["obs"][:, 0] * 2)  # every row complete and consistent
    finally:
        cs.close()


def test_dispenser_rejects_bad_batches(tag):
    cs = make_channel_set("multi", FIELDS, rows_per_step=4, n_slots=2, tag=tag, target_bytes=64)
    try:
        d = Dispenser(FIELDS, Migrator.single(cs))
        good = exp(2, 4)
        with pytest.raises(ConfigError, match="invalid experience field: 'logits'; valid: obs, actions"):
            d.dispense({**good, "logits": good["rewards"]})
        with pytest.raises(ConfigError, match="missing 'dones'"):
            d.dispense({k: v for k, v in good.items() if k != "dones"})
        with pytest.raises(ConfigError, match="shape of field 'obs'"):
            d.dispense({**good, "obs": torch.zeros(2, 4, 5)})
        with pytest.raises(ConfigError, match="steps x envs"):
            d.dispense({**good, "rewards": torch.zeros(3, 4)})
    finally:
        cs.close()


def test_make_channel_set_bad_input(tag):
    with pytest.raises(ConfigError, match="valid: multi, uni"):
        make_channel_set("tri", FIELDS, rows_per_step=1, target_bytes=64, tag=tag)
    with pytest.raises(ConfigError, match="at least one field"):
        make_channel_set("multi", [], rows_per_step=1, target_bytes=64, tag=tag)
    with pytest.raises(ConfigError, match="target_bytes"):
        make_channel_set("multi", FIELDS, rows_per_step=1, target_bytes=4, tag=tag)
    with pytest.raises(ConfigError, match="trainer count"):
        Migrator([], device=0)


def test_migrator_prefers_same_device_then_least_loaded(tag):
    sets = [
        make_channel_set("multi", FIELDS, rows_per_step=1, target_bytes=16, n_slots=4, name=f"r{i}", tag=tag)
        for i in range(3)
    ]
    try:
        routes = [Route(0, 0, sets[0]), Route(1, 1, sets[1]), Route(2, 1, sets[2])]
        local = Migrator(routes, device=1)
        assert local.forward and local._candidates == [1, 2]
        d = Dispenser(FIELDS, local)
        assert [d.dispense(exp(1, 1, k)) for k in range(4)] == [1, 2, 1, 2]  # balanced by load
        remote = Migrator(routes, device=5, gather_batches=2)
        assert not remote.forward
        d2 = Dispenser(FIELDS, remote)
        dest = [d2.dispense(exp(1, 1, k)) for k in range(4)]
        assert dest[0] == dest[1] and dest[2] == dest[3] and dest[0] != dest[2]  # gathers 2, then moves on
        assert dest[0] == 0  # least loaded: route 0 had nothing queued
    finally:
        for s in sets:
            s.close()


def test_staging_is_identity_on_cpu():
    parts = {"obs": torch.ones(2, 3)}
    assert PinnedStaging().to_host(parts) is parts
    out = PinnedStaging().to_device(parts, "cpu")
    assert torch.equal(out["obs"], parts["obs"])


@pytest.mark.gpu
def test_staging_roundtrip_on_gpu():
    st = PinnedStaging()
    x = {"obs": torch.arange(6.0, device="cuda").reshape(2, 3)}
    host = st.to_host(x)
    assert host["obs"].is_pinned() and torch.equal(host["obs"], x["obs"].cpu())
    back = st.to_device(dict(host), "cuda")
    assert torch.equal(back["obs"], x["obs"])


@pytest.mark.parametrize("mode", ["multi", "uni"])
def test_pipeline_across_spawned_agent(tag, mode):
    cs = make_channel_set(mode, FIELDS, rows_per_step=4, target_bytes=64, n_slots=4, tag=tag)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    batches = [exp(5, 4, 20 * k) for k in range(30)]
    p = ctx.Process(target=_workers.dispense, args=(cs, batches, q))
    p.start()
    try:
        seen = 0
        b = Batcher([cs], 16)
        while True:
            try:
                bt = b.next_batch(timeout=60)
            except ChannelClosed:
                break
            check_rows(bt, seen)
            seen += bt["obs"].shape[0]
        assert seen == 600
        assert q.get(timeout=30) == "done"
    finally:
        p.join(30)
        if p.is_alive():
            p.kill()
            p.join()
        cs.close()


def test_multi_send_non_contiguous_fields_and_partial_transfers(tag):
    """Non-contiguous fields take the slicing path, contiguous ones the memmove path: same rows."""
    cs = make_channel_set("multi", FIELDS, rows_per_step=4, target_bytes=16 * 6, n_slots=32, tag=tag)
    try:
        d = Dispenser(FIELDS, Migrator.single(cs))
        for k in range(4):
            e = exp(2, 4, start=8 * k)
            if k % 2:
                e["obs"] = e["obs"].transpose(0, 1).contiguous().transpose(0, 1)  # same values, strided
            d.dispense(e)
        d.close()
        seen = 0
        for batch in Batcher([cs], 5, zero_copy=True):
            check_rows(batch, seen)
            seen += batch["obs"].shape[0]
        assert seen == 32
    finally:
        cs.close()


@pytest.mark.parametrize(
    ("rows", "batch", "want"),
    [(5041, 4096, 4096), (9000, 4096, 8192), (5041, None, 5041), (3000, 4096, 2048), (1000, 4096, 512),
     (100, 97, 97), (100, 1009, 100)],
)
def test_aligned_rows_keeps_batches_inside_transfers(rows: int, batch: int | None, want: int) -> None:
    got = aligned_rows(rows, batch)
    assert got == want
    assert got <= rows
    if batch and got != rows:
        assert got % batch == 0 or batch % got == 0


def test_aligned_transfers_make_every_batch_a_view(tag: str) -> None:
    """Transfers aligned with the trainer batch: the Batcher never stitches (so never copies)."""
    cs = make_channel_set("multi", FIELDS, rows_per_step=4, target_bytes=10 * 16, n_slots=64, tag=tag, batch_rows=8)
    try:
        d = Dispenser(cs.fields, Migrator([Route(0, 0, cs)], device=0))
        exp = {f.name: torch.arange(6 * 4 * math.prod(f.shape)).reshape(6, 4, *f.shape).to(f.dtype) for f in FIELDS}
        d.dispense(exp)
        d.close()
        b = Batcher([cs], batch_size=8, zero_copy=True)
        shm = cs.rings[0]._seg.buf
        base = torch.frombuffer(shm, dtype=torch.uint8).data_ptr()
        for batch in b:
            ptr = batch[FIELDS[0].name].data_ptr()
            assert base <= ptr < base + len(shm), "batch was copied out of shared memory"
    finally:
        cs.close()
