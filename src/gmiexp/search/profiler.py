"""The real ``profile()``: a short training job through the CLI in a subprocess.

A crash (non-zero exit), a hang (timeout) or a missing ``summary.json`` means
"not runnable" (the paper's reading of insufficient GMI resources). Throughput
is measured at steady state, after the warm-up iterations, from the run's
``history``; memory is each GMI's own peak device memory (NVML per process), else the RSS it added.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gmiexp.rundir import RunFailed, gmiexp_command, peak_memory_mb, run_gmiexp
from gmiexp.search.algorithm import ProfileResult
from gmiexp.stats import steady_rate


def steady_throughput(summary: dict[str, Any], warmup_iterations: int) -> float:
    """Median of the per-iteration global env steps/s after warm-up (falls back to the summary's metric).

    The median, not the mean over the window: profiles are short, and one iteration stalled by
    another process on a shared host would otherwise decide Algorithm 2's early stop. Measured by
    :func:`gmiexp.stats.steady_rate` from the end of iteration ``warmup_iterations`` on.
    """
    hist = sorted(summary.get("history") or [], key=lambda h: h["iteration"])
    warm = sum(h["iteration"] < warmup_iterations for h in hist)  # measured from the end of iteration warmup
    rate = steady_rate(hist, skip=warm + 1, median=True)
    return rate or float(summary.get("metrics", {}).get("perf/env_steps_per_s", 0.0))


def result_from_summary(summary: dict[str, Any], gmis: int, warmup_iterations: int,
                        wall_s: float) -> ProfileResult:
    if summary.get("status") != "ok":
        return ProfileResult(False, wall_s=wall_s, error=f"status={summary.get('status')}")
    top = steady_throughput(summary, warmup_iterations) / gmis
    return ProfileResult(top > 0, top=top, mem_mb=peak_memory_mb(summary.get("metrics", {})), wall_s=wall_s)


@dataclass
class SubprocessProfiler:
    """``profile(G, N)``: ``python -m gmiexp mode=train num_gpus=1 gmis_per_gpu=G num_envs=N ...``.

    ``min_profile_steps`` lengthens the measured window of small points: with a fixed iteration
    count, a 128-env point measures a fraction of a second (scheduler noise of 10-30% between
    processes on a shared host), which decides Algorithm 2's early stop. Warm-up grows in proportion.
    ``length`` (the paired search's shortened profiles) scales the measured env steps and iterations.
    """

    workdir: Path
    overrides: list[str] = field(default_factory=list)  # the user's task/backend/... overrides
    warmup_iterations: int = 2
    profile_iterations: int = 4
    timeout_s: float = 300.0
    python: str = sys.executable
    min_profile_steps: int = 0  # env steps (all GMIs) the measured window covers at least
    horizon_length: int = 16  # env steps per GMI and env in one iteration
    repeats: int = 1  # profiles per point; the fastest is kept (cost adds up)

    def iterations(self, gmis_per_gpu: int, num_envs: int, length: float = 1.0) -> tuple[int, int]:
        """(warm-up, measured) iterations of the profile of (G, N) at ``length`` times the standard profile."""
        per_iter = gmis_per_gpu * num_envs * self.horizon_length
        measured = max(math.ceil(self.profile_iterations * length),
                       math.ceil(self.min_profile_steps * length / per_iter))
        warmup = math.ceil(self.warmup_iterations * measured / self.profile_iterations)
        return warmup, measured

    def steps(self, gmis_per_gpu: int, num_envs: int, length: float = 1.0) -> int:
        """Env steps (all GMIs) the profile runs, warm-up included: the paired search's cost model."""
        return sum(self.iterations(gmis_per_gpu, num_envs, length)) * gmis_per_gpu * num_envs * self.horizon_length

    def command(self, gmis_per_gpu: int, num_envs: int, run_dir: Path, length: float = 1.0) -> list[str]:
        iters = sum(self.iterations(gmis_per_gpu, num_envs, length))
        return gmiexp_command(self.overrides_of(gmis_per_gpu, iters, num_envs), run_dir, self.python)

    def overrides_of(self, gmis_per_gpu: int, iterations: int, num_envs: int) -> list[str]:
        return ["mode=train", "num_gpus=1", f"gmis_per_gpu={gmis_per_gpu}", f"num_envs={num_envs}",
                f"max_iterations={iterations}", "launch.progress=false", "logger=none", *self.overrides]

    def __call__(self, gmis_per_gpu: int, num_envs: int, length: float = 1.0) -> ProfileResult:
        """Profile ``repeats`` times and keep the fastest run (any failure makes the point not runnable).

        The fastest, not the mean: interference from other work on a shared host only ever slows a
        run down (``timeit``'s reasoning), so the fastest of a few runs is the least disturbed.
        """
        best: ProfileResult | None = None
        wall = 0.0
        for k in range(self.repeats):
            r = self._once(gmis_per_gpu, num_envs, k, length)
            wall += r.wall_s
            if not r.runnable:
                return replace(r, wall_s=wall)
            if best is None or r.top > best.top:
                best = r
        assert best is not None
        return replace(best, wall_s=wall)

    def _once(self, gmis_per_gpu: int, num_envs: int, k: int, length: float = 1.0) -> ProfileResult:
        run_dir = self.workdir / (f"G{gmis_per_gpu}_N{num_envs}" + (f"_r{k}" if k else ""))
        for again in range(1, 1_000_000):  # a re-measured point (paired search) gets a directory of its own
            if not run_dir.exists():
                break
            run_dir = run_dir.with_name(f"G{gmis_per_gpu}_N{num_envs}_m{again}" + (f"_r{k}" if k else ""))
        run_dir.mkdir(parents=True)
        warmup, measured = self.iterations(gmis_per_gpu, num_envs, length)
        t0 = time.perf_counter()
        try:
            summary = run_gmiexp(self.overrides_of(gmis_per_gpu, warmup + measured, num_envs), run_dir,
                                 python=self.python, timeout_s=self.timeout_s, log_name="profile.log")
        except RunFailed as e:
            error = f"{e.why} (see {e.log})" if e.returncode else e.why
            return ProfileResult(False, wall_s=time.perf_counter() - t0, error=error)
        return result_from_summary(summary, gmis_per_gpu, warmup, time.perf_counter() - t0)
