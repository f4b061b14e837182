"""The run's statistics, one home each: a steady rate, the paired comparison of two rates, the episode window.

The episode window is the run-wide return of the layouts whose GMIs report their episodes in their rows.

**Steady rate** (:func:`steady_rate`): frames per second over a run's epochs after its warm-up, from rows that
carry a frame count and ``wall_s``. The summary's env steps/s, the live rows, a re-shape window's rate and a
search profile's throughput are all this function; they differ only in which epochs they measure (``skip``,
``last``) and whether one stalled epoch may move the figure (``median``: a short profile on a shared host).
:func:`epoch_rates` is its per-epoch view (a window's spread, the median's samples).

**Paired comparison** (:func:`paired_gain`): the search's decisions (:mod:`gmiexp.search.paired`), the
re-shaper's trials (:mod:`gmiexp.launch.elastic`) and ``jobs_per_gpu=auto``'s steps (:mod:`gmiexp.pack.sizing`)
all measure an incumbent A and a candidate B back to back (A-B, A-B-A, A-B-A-B ...) on a host whose speed
drifts by more than the gains they compare. The one statistic they share:

* the **gain** is ``log(B / A)`` from drift-cancelling contrasts: each measurement bracketed in time by two of
  the other side's is compared with those two's linear interpolation at its time (A-B-A: ``log B - (log A1 +
  log A2) / 2``), and the gain is the mean of these contrasts; without a bracketed measurement (A-B) it is the
  difference of the two sides' mean logs. Logs, because a host's drift and noise are multiplicative (a 10%
  slower spell scales every rate alike) and a ratio's log is symmetric in A and B;
* its **standard error** is the exact one of that estimator: the gain is a linear combination ``sum(w_i y_i)``
  of the measurements' log rates, so ``se = sqrt(sum(w_i^2 var_i))``. Each caller supplies each measurement's
  variance from what it measures: a re-shape window from its epochs' spread (:meth:`Sample.of_rates`), a
  profile (one number, no spread of its own) from re-measurements of one point one measurement apart
  (:func:`remeasured_sd`, :meth:`Sample.of_rate`);
* a candidate **beats** the incumbent (:meth:`Gain.beats`) when the gain exceeds both ``z`` standard errors
  (:data:`Z` unless the caller's config says otherwise) and a floor, the smallest gain worth the change
  (``launch.reshape_noise``, pack's ``auto_min_gain``). The search's two-sided rule (decisive, within
  tolerance, futile) reads the same gain and standard error.

**Paired differences** (:func:`mean_interval`): the mean of per-seed differences (a partition's return minus one
GMI's, seed by seed: :func:`paired_differences`) with its two-sided 95% interval from Student's t, and whether 0 lies
inside it. The studies that pair seeds run each seed's variants in an order rotated by the seed (:func:`rotated`) and
average their seeds' curves with :func:`mean_curve`.

**Episode window** (:func:`last_episodes`): the serving and experience layouts' simulator GMIs list the episodes
they finished in each history row; the run's ``reward/mean`` is the mean of the last ``games_to_track`` of them
over every GMI, so it does not depend on how many GMIs share the environments. (The PPO layouts' GMIs keep the same
window themselves, in rl-games' own meter: :mod:`gmiexp.rl.rlgames.episodes`.)

Base layer: plain arithmetic on rows and numbers, importable by search, launch and pack alike.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

Z = 2.0  # a candidate beats the incumbent by more than this many standard errors of the paired gain (~98%, one-sided)


# --- steady rate --------------------------------------------------------------------------------------------------

def _epochs(rows: Sequence[Mapping[str, Any]], skip: int | None,
            last: int | None) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """The measured epochs as (row before, row at its end); the row before the first row is the clock's origin."""
    if skip is None:
        skip = 1 if len(rows) >= 3 else 0
    origin: Mapping[str, Any] = {"wall_s": 0.0}
    pairs = [(rows[i - 1] if i > 0 else origin, rows[i]) for i in range(max(0, skip), len(rows))]
    if last is not None:
        if len(pairs) < last:
            return []
        pairs = pairs[len(pairs) - last:]
    return pairs


def _frames(before: Mapping[str, Any], row: Mapping[str, Any], frames_key: str, cumulative: bool) -> float:
    if not cumulative:
        return float(row[frames_key])
    return float(row[frames_key]) - float(before.get(frames_key, 0.0))


def epoch_rates(rows: Sequence[Mapping[str, Any]], frames_key: str = "frames", *, cumulative: bool = True,
                skip: int | None = 1, last: int | None = None) -> list[float]:
    """Each measured epoch's frames per second (epochs as :func:`steady_rate` selects them; ones of no time dropped)."""
    out = []
    for before, row in _epochs(rows, skip, last):
        dt = float(row["wall_s"]) - float(before["wall_s"])
        if dt > 0:
            out.append(_frames(before, row, frames_key, cumulative) / dt)
    return out


def steady_rate(rows: Sequence[Mapping[str, Any]], frames_key: str = "frames", *, cumulative: bool = True,
                skip: int | None = None, last: int | None = None, median: bool = False) -> float:
    """Frames per second of the epochs after the warm-up: their frames over their time (or their median rate).

    ``rows``: one per epoch, in order, each with ``frames_key`` and ``wall_s`` (seconds since the clock's origin,
    where the frame count was 0). ``cumulative``: ``frames_key`` counts all frames so far (else each epoch's own).
    ``skip``: the leading epochs left out (warm-up); the rate is measured from the end of epoch ``skip``; ``0``
    measures from the origin; None (the summary's rule): the first epoch when two or more follow it, else none.
    ``last``: only the last ``last`` of the epochs left (none when fewer are left). ``median``: the median of
    the epochs' own rates (:func:`epoch_rates`), which one stalled epoch cannot move.
    Returns 0.0 when no epoch is measured or no time passed over them.
    """
    if median:
        rates = epoch_rates(rows, frames_key, cumulative=cumulative, skip=skip, last=last)
        return float(statistics.median(rates)) if rates else 0.0
    pairs = _epochs(rows, skip, last)
    if not pairs:
        return 0.0
    start, end = pairs[0][0], pairs[-1][1]
    frames = sum(_frames(b, r, frames_key, cumulative) for b, r in pairs)
    dt = float(end["wall_s"]) - float(start["wall_s"])
    return frames / dt if dt > 0 else 0.0


# --- paired comparison --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    """One measurement of one side of a paired comparison: its mean log rate and that mean's variance.

    ``t``: when it was taken (its middle, any clock); None for every sample of a comparison: equally spaced in
    the order given. ``var`` 0: no noise known for it.
    """

    candidate: bool  # B (the candidate) or A (the incumbent)
    log_rate: float
    var: float = 0.0
    t: float | None = None

    @classmethod
    def of_rates(cls, candidate: bool, rates: Sequence[float], t: float | None = None) -> Sample:
        """A window of several epochs: the mean of their log rates, its variance their sample variance over n."""
        logs = [math.log(r) for r in rates if r > 0]
        if not logs:
            raise ValueError("a sample needs a positive rate")
        n = len(logs)
        mean = statistics.fmean(logs)
        var = sum((y - mean) ** 2 for y in logs) / (n - 1) / n if n > 1 else 0.0
        return cls(candidate, mean, var, t)

    @classmethod
    def of_rate(cls, candidate: bool, rate: float, difference_sd: float = 0.0, t: float | None = None) -> Sample:
        """One rate, its noise known from re-measurements (:func:`remeasured_sd`): half the difference's variance."""
        return cls(candidate, math.log(rate), difference_sd**2 / 2, t)


@dataclass(frozen=True)
class Gain:
    """``log(B / A)`` from a paired comparison, and its standard error."""

    log: float
    se: float

    @property
    def ratio(self) -> float:
        return math.exp(self.log)

    def beats(self, floor: float = 0.0, z: float = Z) -> bool:
        """B beats A: by more than ``z`` standard errors and more than ``floor`` (a log gain: ``log1p(min_gain)``)."""
        return self.log > max(floor, z * self.se)


def contrast_weights(samples: Sequence[Sample]) -> list[float]:
    """The weights ``w`` of the paired gain ``sum(w_i log_rate_i)`` (module docstring): A's negative, B's positive."""
    sides = {s.candidate for s in samples}
    if sides != {True, False}:
        raise ValueError("a paired gain needs measurements of both sides")
    timed = all(s.t is not None for s in samples)
    ts = [float(s.t) if timed else float(i) for i, s in enumerate(samples)]  # type: ignore[arg-type]
    w = [0.0] * len(samples)
    contrasts = 0
    for i, s in enumerate(samples):
        other = [j for j, o in enumerate(samples) if o.candidate != s.candidate]
        before = [j for j in other if ts[j] < ts[i]]
        after = [j for j in other if ts[j] > ts[i]]
        if not (before and after):
            continue
        j0, j1 = max(before, key=lambda j: ts[j]), min(after, key=lambda j: ts[j])
        f = (ts[i] - ts[j0]) / (ts[j1] - ts[j0])
        sign = 1.0 if s.candidate else -1.0  # a contrast is always B minus A
        w[i] += sign
        w[j0] -= sign * (1 - f)
        w[j1] -= sign * f
        contrasts += 1
    if contrasts:
        return [x / contrasts for x in w]
    m_b = sum(s.candidate for s in samples)
    m_a = len(samples) - m_b
    return [1 / m_b if s.candidate else -1 / m_a for s in samples]


def paired_gain(samples: Sequence[Sample]) -> Gain:
    """The paired gain of B over A and its standard error from interleaved measurements (module docstring)."""
    w = contrast_weights(samples)
    return Gain(sum(wi * s.log_rate for wi, s in zip(w, samples, strict=True)),
                math.sqrt(sum(wi * wi * s.var for wi, s in zip(w, samples, strict=True))))


def remeasured_sd(diffs: Sequence[float], prior: float = 0.0, weight: float = 0.0) -> float:
    """Pooled sd of ``log(r2 / r1)`` between two measurements of one point with one measurement between them.

    Each A-B-A gives one such difference (its two A's); it holds a measurement's noise and the drift over two
    measurements, so it bounds what a contrast can suffer. ``prior`` stands in for ``weight`` differences until
    enough are measured (the root mean square of the differences and ``weight`` copies of ``prior``).
    """
    n = weight + len(diffs)
    return math.sqrt((weight * prior**2 + sum(d * d for d in diffs)) / n) if n > 0 else 0.0


#: a history row's lists of the episodes a GMI finished since its previous row (serving and experience layouts)
EPISODE_KEYS = ("episodes/returns", "episodes/lengths")


def last_episodes(histories: Mapping[int, Sequence[Mapping[str, Any]]], window: int,
                  key: str = "episodes/returns") -> list[float]:
    """The last ``window`` episodes finished anywhere in the run, oldest first, from every GMI's history rows.

    Row ``i`` of every GMI comes before row ``i + 1`` of any, and within one iteration GMIs go in id order:
    the GMIs write their rows at about the same time, so this is the order the episodes ended in to within an
    iteration. Reads backwards and stops at ``window`` episodes.
    """
    gids = sorted(histories)
    depth = max((len(histories[g]) for g in gids), default=0)
    out: list[float] = []
    for i in range(depth - 1, -1, -1):
        for g in reversed(gids):
            rows = histories[g]
            if i < len(rows):
                out[:0] = [float(v) for v in rows[i].get(key) or ()]
        if len(out) >= window:
            break
    return out[-window:] if window > 0 else []


def time_to_return(rows: Sequence[Mapping[str, Any]], threshold: float, *, x: str = "wall_s",
                   key: str = "reward/mean") -> float | None:
    """``x`` (wall seconds, frames) of the first row whose ``key`` reaches ``threshold``; None if none does."""
    for r in rows:
        v = r.get(key)
        if v is not None and float(v) >= threshold and r.get(x) is not None:
            return float(r[x])
    return None


def value_at(rows: Sequence[Mapping[str, Any]], at: float, *, x: str = "frames",
             key: str = "reward/mean") -> float | None:
    """``key`` of the last row with ``x <= at`` (a run's return at equal frames or wall time); None before any."""
    seen = None
    for r in rows:
        if r.get(x) is not None and float(r[x]) <= at and r.get(key) is not None:
            seen = float(r[key])
    return seen


# --- paired differences -------------------------------------------------------------------------------------------

#: Student's t, two-sided 95% (the 0.975 quantile), for 1-30 degrees of freedom
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
       2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (past 30: Cornish-Fisher, within 0.001)."""
    if df < 1:
        raise ValueError("t needs at least 1 degree of freedom")
    if df <= len(T95):
        return T95[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class Interval:
    """A mean and its two-sided 95% interval ``mean ± half``; ``half`` None with fewer than two values."""

    mean: float
    half: float | None
    n: int

    @property
    def low(self) -> float | None:
        return None if self.half is None else self.mean - self.half

    @property
    def high(self) -> float | None:
        return None if self.half is None else self.mean + self.half

    def contains(self, x: float = 0.0) -> bool | None:
        """Whether ``x`` lies inside (bounds included); None when there is no interval."""
        return None if self.half is None else self.mean - self.half <= x <= self.mean + self.half


def mean_interval(values: Sequence[float]) -> Interval:
    """The mean of ``values`` (paired differences, one per seed) and its t interval: ``t95(n-1) x sd / sqrt(n)``."""
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError("an interval needs at least one value")
    mean = statistics.fmean(vals)
    if len(vals) < 2:
        return Interval(mean, None, len(vals))
    return Interval(mean, t95(len(vals) - 1) * statistics.stdev(vals) / math.sqrt(len(vals)), len(vals))


def paired_differences(values: Mapping[tuple[Any, Any], float | None], ref: Any, other: Any) -> list[float]:
    """``other`` minus ``ref``, seed by seed (``values`` keyed ``(seed, variant)``; seeds where both have a value).

    Pairing by seed takes out what the seed decides alike for both variants (initial weights, environments), so
    the differences' spread is the variants' own noise, not the seeds'.
    """
    seeds = sorted({seed for seed, _ in values})
    return [float(values[s, other]) - float(values[s, ref]) for s in seeds  # type: ignore[arg-type]
            if values.get((s, other)) is not None and values.get((s, ref)) is not None]


def rotated(items: Sequence[T], k: int) -> list[T]:
    """``items`` rotated by ``k``: seed k's run order, so each variant runs first as often as any other.

    A host that drifts within a seed's runs then slows each variant alike over the seeds.
    """
    if not items:
        return []
    k %= len(items)
    return [*items[k:], *items[:k]]


def mean_curve(curves: Sequence[Sequence[tuple[float, float]]]) -> list[tuple[float, float]]:
    """The seeds' mean ``y`` at the ``x`` of the shortest curve (each seed's last value at or before it).

    ``curves``: per seed, ``(x, y)`` points in increasing ``x`` (frames, or seconds); empty curves are left out.
    Past the shortest curve's end not every seed has a value, so the mean stops there.
    """
    curves = [c for c in curves if c]
    if not curves:
        return []
    grid = min(curves, key=lambda c: c[-1][0])
    out = []
    for x, _ in grid:
        vals = [value_at([{"x": cx, "y": cy} for cx, cy in c], x, x="x", key="y") for c in curves]
        if all(v is not None for v in vals):
            out.append((x, statistics.fmean(v for v in vals if v is not None)))
    return out
