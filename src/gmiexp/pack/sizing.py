"""``jobs_per_gpu=auto``: pick the packing from short profiles of the first member.

k copies of the first member run at once on one GPU, each on the slot it would get with
``jobs_per_gpu=k``, each profiled by the search's :class:`~gmiexp.search.profiler.SubprocessProfiler`
(a short run through the CLI, steady-state env steps/s from its history). Going from k to k+1 is
decided as the search decides a step, on a paired measurement: incumbent, candidate, incumbent back
to back, and the paired gain of the candidate's total env steps/s over the two incumbent runs
(:func:`gmiexp.stats.paired_gain`: ``log B - (log A1 + log A2) / 2``), so the host's drift over minutes
cancels within the pair. Each run's noise comes from the re-measured incumbents (A1 against A2, pooled
over the steps so far: :func:`gmiexp.stats.remeasured_sd`). The candidate is taken when it beats the
incumbent (:meth:`gmiexp.stats.Gain.beats`): by more than ``min_gain`` and by more than
:data:`gmiexp.stats.Z` standard errors; the first that does not (or does not run) ends the search.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from gmiexp.pack.slots import Slot
from gmiexp.search.algorithm import ProfileResult
from gmiexp.search.profiler import SubprocessProfiler
from gmiexp.search.runner import OWN_KEYS
from gmiexp.stats import Gain, Sample, Z, paired_gain, remeasured_sd

# a profile sets these itself (or they would distort it); the rest of the member's overrides pass through
PROFILE_KEYS = tuple(k for k in OWN_KEYS if k not in ("experiment",)) + ("hardware.cpus", "hardware.gpus")


def profile_overrides(overrides: list[str]) -> list[str]:
    def key(o: str) -> str:
        return o.split("=", 1)[0].lstrip("+~")

    return [o for o in overrides if key(o).split(".")[0] not in OWN_KEYS and key(o) not in PROFILE_KEYS]


@dataclass
class PackProfiler:
    """Total steady-state env steps/s of k copies of one job run at once, one per slot (a paired step's side)."""

    workdir: Path
    overrides: list[str]  # the member's overrides, minus what a profile sets
    gmis_per_gpu: int
    num_envs: int
    slots_for: Callable[[int], list[Slot]]  # k -> the k slots of one GPU
    slot_overrides: Callable[[Slot, int], list[str]]  # (slot, k) -> its overrides
    warmup_iterations: int = 2
    profile_iterations: int = 4
    timeout_s: float = 300.0
    horizon_length: int = 16
    min_profile_steps: int = 0
    runs: int = field(default=0, init=False)

    def __call__(self, k: int) -> tuple[float, list[ProfileResult]]:
        self.runs += 1
        slots = self.slots_for(k)
        tag = f"k{k}_run{self.runs}"
        profilers = [SubprocessProfiler(workdir=self.workdir / tag / f"copy{i}",
                                        overrides=[*self.overrides, *self.slot_overrides(s, k)],
                                        warmup_iterations=self.warmup_iterations,
                                        profile_iterations=self.profile_iterations, timeout_s=self.timeout_s,
                                        horizon_length=self.horizon_length,
                                        min_profile_steps=self.min_profile_steps)
                     for i, s in enumerate(slots)]
        with ThreadPoolExecutor(max_workers=k) as pool:
            futures = [pool.submit(p, self.gmis_per_gpu, self.num_envs) for p in profilers]
            try:
                results = [f.result() for f in futures]
            except BaseException:
                stop_children()  # the profiles run in their own sessions: out of the terminal's reach
                raise
        total = sum(r.top * self.gmis_per_gpu for r in results) if all(r.runnable for r in results) else 0.0
        return total, results


def stop_children(grace_s: float = 15.0) -> None:
    """SIGINT every child's process group (profile runs), then SIGKILL what is left after ``grace_s``."""
    kids = psutil.Process().children()
    for sig in (signal.SIGINT, signal.SIGKILL):
        for p in kids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, sig)
        if sig == signal.SIGINT:
            psutil.wait_procs(kids, timeout=grace_s)


def paired(profile: Callable[[int], tuple[float, Any]], incumbent: int, candidate: int,
           diffs: list[float]) -> tuple[dict[str, Any], Gain | None]:
    """Incumbent, candidate, incumbent back to back: the step's trace and the candidate's paired gain.

    ``diffs``: the earlier steps' re-measurement differences ``log(A2 / A1)``; this step's is added, and
    their pooled sd is each run's noise. The gain is None when the candidate or both incumbent runs did
    not run (a total of 0).
    """
    a1, _ = profile(incumbent)
    b, _ = profile(candidate)
    a2, _ = profile(incumbent)
    if a1 > 0 and a2 > 0:
        diffs.append(math.log(a2 / a1))
    sd = remeasured_sd(diffs)
    runs = [(False, a1), (True, b), (False, a2)]
    gain = (paired_gain([Sample.of_rate(is_b, total, sd) for is_b, total in runs if total > 0])
            if b > 0 and max(a1, a2) > 0 else None)
    return {"incumbent": incumbent, "candidate": candidate, "incumbent_steps_per_s": [round(a1, 1), round(a2, 1)],
            "candidate_steps_per_s": round(b, 1), "ratio": round(gain.ratio, 3) if gain else None,
            "noise": round(gain.se, 4) if gain else None}, gain


def choose(profile: Callable[[int], tuple[float, Any]], max_jobs: int, min_gain: float,
           say: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)) -> dict[str, Any]:
    """Raise jobs per GPU from 1 while a paired step gains more than ``min_gain``; return choice and trace."""
    t0 = time.perf_counter()
    best, steps = 1, []
    diffs: list[float] = []  # the incumbents' re-measurements, every step's: the runs' noise
    for k in range(2, max_jobs + 1):
        step, gain = paired(profile, best, k, diffs)
        steps.append(step)
        if gain is None:
            say(f"pack auto: {k} jobs/GPU did not run (see the profile logs); keeping {best}")
            break
        floor = math.log1p(min_gain)
        taken = gain.beats(floor)
        needs = math.exp(max(floor, Z * gain.se))
        say(f"pack auto: {k} jobs/GPU vs {best}: {step['candidate_steps_per_s']:,.0f} vs "
            f"{sum(step['incumbent_steps_per_s']) / 2:,.0f} env steps/s in total (paired ratio {gain.ratio:.3f}, "
            f"noise {gain.se:.3f}; needs > {needs:.3f}) -> {'take' if taken else 'keep'} {k if taken else best}")
        if not taken:
            break
        best = k
    why = (f"pack auto: jobs_per_gpu={best}: " + ("packing never gained enough over one job per GPU"
                                                    if best == 1 else f"the largest packing that raised total "
                                                    f"env steps/s by more than {min_gain:.0%} and its noise in a "
                                                    "paired step")
           + f" ({len(steps) * 3} profiles, {time.perf_counter() - t0:.0f} s)")
    say(why)
    return {"jobs_per_gpu": best, "min_gain": min_gain, "max_jobs": max_jobs, "steps": steps, "why": why}
