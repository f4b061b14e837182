"""The normaliser arithmetic both trainers share equals one process holding every row."""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
from reduction_helpers import ThreadSum

from gmiexp.comm.moments import Moments, group_moments, merge_from_start


def run_gmis(world: int, fn: Callable[[int, Callable[[torch.Tensor], None]], object]) -> list[object]:
    """``fn(rank, all_reduce)`` on ``world`` threads standing for GMIs; what each returned, by rank."""
    red, out = ThreadSum(world), [None] * world

    def body(i: int) -> None:
        out[i] = fn(i, red.for_rank(i))

    threads = [threading.Thread(target=body, args=(i,)) for i in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


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


def moments(x: torch.Tensor) -> Moments:
    d = x.double()
    return Moments(float(d.shape[0]), d.mean(0), d.var(0, unbiased=False))


def chan(a: Moments, x: torch.Tensor) -> Moments:
    """``a`` updated with the rows ``x`` (rl-games' and rsl_rl's running update)."""
    b = moments(x)
    n = a.count + b.count
    delta = b.mean - a.mean
    mean = a.mean + delta * b.count / n
    var = (a.var * a.count + b.var * b.count + delta ** 2 * a.count * b.count / n) / n
    return Moments(n, mean, var)


def test_the_merge_counts_the_common_start_once() -> None:
    """From a restored normaliser (100,000 samples of N(0,1)) each of 2 GMIs adds 10,000 of N(1,1).

    One process on all 120,000: mean 0.16, var 1.14 (the merge that counted the start twice gave 0.089 / 1.086).
    """
    g = torch.Generator().manual_seed(1)
    start = moments(torch.randn(100_000, 2, generator=g, dtype=torch.float64))
    adds = [torch.randn(10_000, 2, generator=g, dtype=torch.float64) + 1 for _ in range(2)]
    one = chan(start, torch.cat(adds))
    got = run_gmis(2, lambda i, red: merge_from_start(start, chan(start, adds[i]), red))
    for m in got:
        assert m.count == 120_000
        torch.testing.assert_close(m.mean, one.mean, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(m.var, one.var, rtol=1e-10, atol=1e-12)
    assert 0.15 < float(one.mean[0]) < 0.18 and 1.12 < float(one.var[0]) < 1.16


def test_a_gmi_that_added_nothing_keeps_the_start() -> None:
    start = Moments(10.0, torch.tensor([1.0], dtype=torch.float64), torch.tensor([2.0], dtype=torch.float64))
    got = run_gmis(2, lambda i, red: merge_from_start(start, start, red))
    assert got[0] == start and got[1] == start
