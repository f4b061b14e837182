"""Algorithm 2 of the paper (profiling-based GMI exploration), its Chinese-summary variant, and a grid.

The profiler is injected (``profile(gmis_per_gpu, num_envs) -> ProfileResult``)
so the search logic is tested against an analytic profiler and run for real
against short training jobs (:mod:`gmiexp.search.profiler`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProfileResult:
    """One profiled design point.

    ``top`` is the steady-state env steps/s of ONE GMI while ``gmis_per_gpu``
    GMIs share the device, ``mem_mb`` that GMI's peak memory; ``wall_s`` is
    what the profile cost (kept on cache hits so search and grid costs compare).
    """

    runnable: bool
    top: float = 0.0
    mem_mb: float = 0.0
    wall_s: float = 0.0
    error: str = ""
    cached: bool = False


Profiler = Callable[[int, int], ProfileResult]


@dataclass
class Step:
    """A profiled point and what the search decided there (for the trace and the report)."""

    gmis_per_gpu: int
    num_envs: int
    result: ProfileResult
    decision: str  # unrunnable | init | saturated | candidate | best | pair (a paired re-measurement)
    sat: float | None = None
    estimate: float | None = None
    length: float = 1.0  # profile length relative to a standard profile (the paired search shortens them)
    cost_share: float = 1.0  # modelled cost of this profile over the point's standard profile


@dataclass
class SearchOutcome:
    """Chosen (num_envs, gmis_per_gpu), its projected system throughput, and every profiled step."""

    method: str
    num_envs: int | None = None
    gmis_per_gpu: int | None = None
    estimate: float = -math.inf
    steps: list[Step] = field(default_factory=list)
    comparisons: list[dict] = field(default_factory=list)  # paired decisions (paired variant only)
    cost: dict[str, float] = field(default_factory=dict)  # modelled cost against the grid's (paired variant only)

    @property
    def found(self) -> bool:
        return self.num_envs is not None

    @property
    def profiles(self) -> int:
        return len(self.steps)

    @property
    def profile_s(self) -> float:
        """Profiling cost of the visited points (original cost for cached points)."""
        return sum(s.result.wall_s for s in self.steps)

    def record(self, step: Step) -> None:
        self.steps.append(step)

    def offer(self, step: Step) -> None:
        """Make ``step`` the best configuration if its estimate beats the best so far."""
        assert step.estimate is not None
        if step.estimate > self.estimate:
            self.estimate, self.num_envs, self.gmis_per_gpu = step.estimate, step.num_envs, step.gmis_per_gpu
            step.decision = "best"


def estimate(gmis_per_gpu: int, num_gpus: int, top: float) -> float:
    """Project system throughput: every GMI on every GPU runs at the profiled per-GMI rate.

    The profile already ran ``gmis_per_gpu`` GMIs side by side, so contention
    inside a GPU is measured; GPUs are assumed to scale linearly (the Chinese
    summary states this formula; the paper leaves ``estimate`` unspecified).
    """
    return top * gmis_per_gpu * num_gpus


def relative_change(new: float, old: float) -> float:
    return (new - old) / old if old > 0 else math.inf


def saturation(top: float, pre_top: float, mem: float, pre_mem: float) -> float:
    """Sat = R_top / R_mem (Algorithm 2 lines 18-20).

    When memory did not grow (R_mem <= 0, common with process RSS on CPU) the
    ratio is undefined: a throughput gain then came for free (+inf, not
    saturated) and no gain means saturated (-inf).
    """
    r_top, r_mem = relative_change(top, pre_top), relative_change(mem, pre_mem)
    if r_mem <= 0:
        return math.inf if r_top > 0 else -math.inf
    return r_top / r_mem


def saturated(sat: float, top: float, pre_top: float, alpha: float, min_gain: float) -> bool:
    """Algorithm 2's early stop, Sat < alpha, or a throughput gain below the noise floor ``min_gain``.

    The paper stops when memory grows a lot for a "minor improvement of computation throughput".
    A gain smaller than the profiles' run-to-run noise is such a minor improvement whatever the
    memory did; without the floor, noise alone keeps a flat row climbing into its most expensive
    points about half the time. ``min_gain=0`` is the paper's rule alone.
    """
    return sat < alpha or relative_change(top, pre_top) < min_gain


def algorithm2(profile: Profiler, max_gmis_per_gpu: int, num_envs: Sequence[int], num_gpus: int,
               alpha: float, min_gain: float = 0.0) -> SearchOutcome:
    """Algorithm 2 as written in the paper: GMIs per GPU from the maximum down to 1.

    The first runnable point of each GMI size only initialises the tracking
    variables (line 13-15); a point whose Sat < alpha (or whose gain is below
    ``min_gain``) stops that GMI size.
    """
    out = SearchOutcome(method="paper")
    for g in range(max_gmis_per_gpu, 0, -1):
        pre_top = pre_mem = 0.0
        for n in num_envs:
            r = profile(g, n)
            if not r.runnable:
                out.record(Step(g, n, r, "unrunnable"))
                continue
            if pre_top == 0 and pre_mem == 0:
                pre_top, pre_mem = r.top, r.mem_mb
                out.record(Step(g, n, r, "init"))
                continue
            sat = saturation(r.top, pre_top, r.mem_mb, pre_mem)
            stop = saturated(sat, r.top, pre_top, alpha, min_gain)
            pre_top, pre_mem = r.top, r.mem_mb
            if stop:
                out.record(Step(g, n, r, "saturated", sat=sat))
                break
            step = Step(g, n, r, "candidate", sat=sat, estimate=estimate(g, num_gpus, r.top))
            out.record(step)
            out.offer(step)
    return out


def powers_of_two_upto(limit: int) -> list[int]:
    return [1 << i for i in range(max(limit, 1).bit_length()) if 1 << i <= limit]


def algorithm2_cn(profile: Profiler, max_gmis_per_gpu: int, num_envs: Sequence[int], num_gpus: int,
                  alpha: float, min_gain: float = 0.0) -> SearchOutcome:
    """The Chinese summary's Algorithm 2: GMIs per GPU in 1, 2, 4, 8 (up), every runnable point a candidate.

    Differences from the paper, kept literally: GMI sizes ascend in powers of
    two; the first runnable point is estimated (Sat is +inf when there is no
    previous point); the previous point is only advanced when a new global best
    is found (line 25 sits inside the ``if``).
    """
    out = SearchOutcome(method="cn")
    for g in powers_of_two_upto(max_gmis_per_gpu):
        last_top = last_mem = 0.0
        for n in num_envs:
            r = profile(g, n)
            if not r.runnable or r.top <= 0:
                out.record(Step(g, n, r, "unrunnable"))
                continue
            sat = saturation(r.top, last_top, r.mem_mb, last_mem) if last_top > 0 else math.inf
            if saturated(sat, r.top, last_top, alpha, min_gain):
                out.record(Step(g, n, r, "saturated", sat=sat))
                break
            step = Step(g, n, r, "candidate", sat=sat, estimate=estimate(g, num_gpus, r.top))
            out.record(step)
            out.offer(step)
            if step.decision == "best":
                last_top, last_mem = r.top, r.mem_mb
    return out


def grid(profile: Profiler, max_gmis_per_gpu: int, num_envs: Sequence[int], num_gpus: int,
         alpha: float = 0.0, min_gain: float = 0.0) -> SearchOutcome:
    """Profile every point (the reference Algorithm 2 is compared against); the stop rule is unused."""
    out = SearchOutcome(method="grid")
    for g in range(max_gmis_per_gpu, 0, -1):
        for n in num_envs:
            r = profile(g, n)
            if not r.runnable:
                out.record(Step(g, n, r, "unrunnable"))
                continue
            step = Step(g, n, r, "candidate", estimate=estimate(g, num_gpus, r.top))
            out.record(step)
            out.offer(step)
    return out


METHODS: dict[str, Callable[..., SearchOutcome]] = {"paper": algorithm2, "cn": algorithm2_cn, "grid": grid}


def design_space(max_gmis_per_gpu: int, num_envs: Iterable[int]) -> list[tuple[int, int]]:
    """Every (gmis_per_gpu, num_envs) point a grid visits (for the progress bar's total)."""
    return [(g, n) for g in range(max_gmis_per_gpu, 0, -1) for n in num_envs]
