"""A simulated shared host for the search: an analytic throughput surface seen through drift and noise.

Shaped on the 2-core CPU box's torch Cartpole (issue 17, part 5): system throughput rises with
num_envs to a knee and sags a little past it; two GMIs per device beat one, three and four are
oversubscribed. The host's speed drifts by 20-40% (peak to peak) over minutes and each profile
adds 5-10% noise (more for a shortened profile); a profile costs a launch plus its env steps at
the drifting speed, and the simulated clock advances by it.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from gmiexp.search import ProfileResult
from gmiexp.search.paired import launch_and_steps
from gmiexp.search.profiler import SubprocessProfiler

NUM_ENVS = [128, 256, 512, 1024, 2048, 4096, 8192, 16384]
MAX_GMIS = 4


# The default search's profile length and the runner's cost model.
LENGTHS = SubprocessProfiler(workdir=Path("unused"), warmup_iterations=2, profile_iterations=4,
                             min_profile_steps=200_000, horizon_length=16)
LAUNCH_STEPS = 500_000
cost = launch_and_steps(LENGTHS.steps, LAUNCH_STEPS)


class NoisyHost:
    """``profile(G, N, length)`` on a simulated host; ``true_rate`` is the surface without drift or noise."""

    def __init__(self, seed: int, drift: tuple[float, float] = (0.2, 0.4), noise: tuple[float, float] = (0.05, 0.1)):
        rng = random.Random(seed)
        self.rng = random.Random(seed + 1)
        self.peak = {g: p * rng.uniform(0.96, 1.04) for g, p in {1: 110e3, 2: 140e3, 3: 124e3, 4: 110e3}.items()}
        self.knee = {g: k * rng.uniform(0.8, 1.25) for g, k in {1: 1200, 2: 600, 3: 400, 4: 300}.items()}
        # Speed: two slow sinusoids whose peak-to-peak swing is 20-40% over the simulated time.
        self.swing = rng.uniform(*drift) / 2
        self.waves = [(rng.uniform(120, 600), rng.uniform(0, 2 * math.pi), w) for w in (0.7, 0.3)]
        self.sigma = rng.uniform(*noise)
        self.clock = 0.0
        self.calls: list[tuple[int, int, float]] = []

    def speed(self, t: float) -> float:
        return 1 + self.swing * sum(w * math.sin(2 * math.pi * t / period + phase)
                                    for period, phase, w in self.waves)

    def true_rate(self, g: int, n: int) -> float:
        """System env steps/s: rises to a knee in num_envs, then sags 3% per doubling of total envs past 16384."""
        sag = 1 - 0.03 * max(0.0, math.log2(g * n / 16384))
        return self.peak[g] * math.sqrt(1 - math.exp(-n / self.knee[g])) * sag

    def mem(self, n: int) -> float:
        return 30.0 + n / 16  # per-GMI workload MB: a fixed part plus the rollout buffers

    def __call__(self, g: int, n: int, length: float = 1.0) -> ProfileResult:
        self.calls.append((g, n, length))
        steps = LENGTHS.steps(g, n, length)
        launch_s = 4.0 + 1.5 * g
        mid = self.clock + launch_s + steps / self.true_rate(g, n) / 2
        sigma = self.sigma * math.sqrt(0.5 + 0.5 / length)  # half the noise is per launch, half shrinks with length
        rate = self.true_rate(g, n) * self.speed(mid) * math.exp(self.rng.gauss(0, sigma))
        wall = launch_s + steps / (self.true_rate(g, n) * self.speed(mid))
        self.clock += wall
        return ProfileResult(True, top=rate / g, mem_mb=self.mem(n), wall_s=wall)

    def quality(self, g: int | None, n: int | None) -> float:
        """True throughput at a pick over the true best of the space."""
        best = max(self.true_rate(gg, nn) for gg in range(1, MAX_GMIS + 1) for nn in NUM_ENVS)
        return 0.0 if g is None or n is None else self.true_rate(g, n) / best
