"""The normaliser arithmetic both trainers share equals one process holding every row."""

from __future__ import annotations

import torch
from reduction_helpers import run_gmis

from gmiexp.comm.moments import group_moments


def test_group_moments_are_those_of_every_gmis_rows() -> None:
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(n, 3, generator=g) * (1 + i) + 100.0 * i for i, n in enumerate((5, 17, 9))]
    shift = torch.tensor([50.0, -3.0, 0.5], dtype=torch.float64)
    got = run_gmis(3, lambda i, red: group_moments(parts[i], red, shift=shift))
    whole = torch.cat(parts).double()
    for m in got:
        assert m.count == 31
        torch.testing.assert_close(m.mean, whole.mean(0), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(m.var, whole.var(0, unbiased=False), rtol=1e-10, atol=1e-10)
    assert all(torch.equal(m.mean, got[0].mean) and torch.equal(m.var, got[0].var) for m in got)


def test_group_moments_over_channel_axes() -> None:
    x = [torch.rand(4, 2, 3, 3, generator=torch.Generator().manual_seed(i)) for i in range(2)]
    got = run_gmis(2, lambda i, red: group_moments(x[i], red, axis=(0, 2, 3)))
    whole = torch.cat(x).double()
    torch.testing.assert_close(got[0].mean, whole.mean((0, 2, 3)))
    torch.testing.assert_close(got[0].var, whole.var((0, 2, 3), unbiased=False))
