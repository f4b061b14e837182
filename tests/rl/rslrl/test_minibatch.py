"""The GMIs' rows of one process's minibatches: every row once, in the minibatch one process puts it in."""

from __future__ import annotations

import pytest
import torch

from gmiexp.rl.rslrl.minibatch import gmi_columns, gmi_minibatches


@pytest.mark.parametrize("shares", [[8, 8], [4, 4, 4, 4], [1, 15], [3, 6, 7]])
def test_the_gmis_minibatch_i_together_are_one_process_s_minibatch_i(shares: list[int]) -> None:
    steps, minibatches, envs = 6, 4, sum(shares)
    perm = torch.randperm(envs * steps, generator=torch.Generator().manual_seed(0))
    size = perm.numel() // minibatches
    union: list[list[int]] = [[] for _ in range(minibatches)]
    for rank in range(len(shares)):
        cols = torch.tensor(gmi_columns(rank, shares, minibatches))
        for i, local in enumerate(gmi_minibatches(perm, minibatches, envs, cols.tolist())):
            t, k = local // len(cols), local % len(cols)
            assert bool(((t >= 0) & (t < steps)).all())
            union[i] += (t * envs + cols[k]).tolist()  # back to one process's time-major rows
    for i in range(minibatches):
        assert sorted(union[i]) == sorted(perm[i * size:(i + 1) * size].tolist())


def test_equal_shares_interleave_so_each_gmi_s_block_i_is_part_of_one_process_s() -> None:
    """rsl_rl's recurrent cut: block ``i`` of one process's environments is the union of the GMIs' block ``i``."""
    shares, minibatches = [8, 8, 8], 4
    per_gmi, per_process = 8 // minibatches, 24 // minibatches
    for rank in range(3):
        cols = gmi_columns(rank, shares, minibatches)
        for i in range(minibatches):
            block = cols[i * per_gmi:(i + 1) * per_gmi]
            assert all(i * per_process <= e < (i + 1) * per_process for e in block)
    assert sorted(e for r in range(3) for e in gmi_columns(r, shares, minibatches)) == list(range(24))


def test_unequal_shares_are_contiguous_blocks_in_group_order() -> None:
    assert [gmi_columns(r, [3, 5, 2], 4) for r in range(3)] == [[0, 1, 2], [3, 4, 5, 6, 7], [8, 9]]
