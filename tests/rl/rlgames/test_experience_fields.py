"""The experience fields of every policy kind through the channels: uint8 frames stay uint8, states ride along."""

from __future__ import annotations

import pytest
import torch

from gmiexp.comm.channels import DEFAULT_FIELDS, Batcher, Dispenser, Migrator, make_channel_set
from gmiexp.rl.rlgames.policy import Spaces, experience_fields
from gmiexp.rl.rlgames.states import StateLayout

FRAMES = (4, 12, 12)


def rollout(fields: list, horizon: int, n: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = {}
    for f in fields:
        shape = (horizon, n, *f.shape)
        if f.dtype == torch.float32:
            out[f.name] = torch.randn(shape, generator=g)
        else:
            hi = 256 if f.dtype == torch.uint8 else 3
            out[f.name] = torch.randint(0, hi, shape, generator=g).to(f.dtype)
    return out


def test_fields_of_a_pixel_multi_discrete_recurrent_policy() -> None:
    spaces = Spaces(FRAMES, False, 2, obs_dtype=torch.uint8, nvec=(3, 2))
    fields = {f.name: f for f in experience_fields(spaces, list(DEFAULT_FIELDS), StateLayout(2, 1, 8, 4))}
    assert (fields["obs"].shape, fields["obs"].dtype, fields["obs"].row_bytes) == (FRAMES, torch.uint8, 576)
    assert (fields["actions"].shape, fields["actions"].dtype) == ((2,), torch.int64)
    assert (fields["rnn_states"].shape, fields["rnn_states"].dtype) == ((4,), torch.float32)  # 16 floats / 4 rows
    assert list(fields)[-2:] == ["seq", "version"]


@pytest.mark.parametrize("mode", ["multi", "uni"])
@pytest.mark.parametrize("zero_copy", [False, True])
def test_uint8_frames_and_recurrent_states_round_trip_bit_exact(tag: str, mode: str, zero_copy: bool) -> None:
    spaces = Spaces(FRAMES, False, 3, obs_dtype=torch.uint8)
    fields = experience_fields(spaces, list(DEFAULT_FIELDS), StateLayout(2, 1, 8, 4))
    horizon, n = 9, 4
    # every transfer of both rollouts fits (uni: 20 x 8 slots for 2 x 9 steps x 8 fields): one thread sends, then reads
    cs = make_channel_set(mode, fields, rows_per_step=n, target_bytes=1 << 14, n_slots=20, tag=tag,
                          batch_rows=horizon * n)
    try:
        d = Dispenser(fields, Migrator.single(cs))
        b = Batcher([cs], horizon * n, zero_copy=zero_copy)
        sent = [rollout(fields, horizon, n, s) for s in (0, 1)]
        for r in sent:
            d.dispense(r)
        d.close()
        for r in sent:
            got = b.next_batch(timeout=10)
            for f in fields:
                assert got[f.name].dtype == f.dtype and got[f.name].shape == (horizon * n, *f.shape)
                assert torch.equal(got[f.name], r[f.name].reshape(horizon * n, *f.shape)), f.name
    finally:
        cs.close()
