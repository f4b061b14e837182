"""Algorithm 2 against an analytic profiler with a known optimum and known saturation points."""

import math

import pytest

from gmiexp.search import ProfileResult, algorithm2, algorithm2_cn, estimate, grid, saturation

NUM_ENVS = [128, 256, 512, 1024, 2048, 4096, 8192, 16384]
# Per-GMI throughput grows linearly in num_envs up to the knee, then stays flat (saturated).
KNEE = {4: 512, 3: 1024, 2: 2048, 1: 4096}
RATE = {4: 30.0, 3: 35.0, 2: 24.0, 1: 20.0}
CRASH = {(4, 128)}
NUM_GPUS = 2
# Hand-worked projections at the knees: G4 122,880; G3 215,040; G2 196,608; G1 163,840.
OPTIMUM = (1024, 3)


class Analytic:
    """profile(G, N): per-GMI top = RATE[G] * min(N, KNEE[G]); memory 100 MB + N/8 MB; counts calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, g, n):
        self.calls.append((g, n))
        if (g, n) in CRASH:
            return ProfileResult(False, wall_s=1.0, error="crash")
        return ProfileResult(True, top=RATE[g] * min(n, KNEE[g]), mem_mb=100 + n / 8, wall_s=n / 128)


def test_estimate_scales_with_gmis_and_gpus():
    assert estimate(3, 2, 1000.0) == 6000.0


def test_saturation_is_ratio_of_relative_gains():
    assert saturation(200, 100, 150, 100) == pytest.approx(1.0 / 0.5)
    assert saturation(100, 100, 200, 100) == 0.0
    assert saturation(150, 100, 100, 100) == math.inf  # memory flat, throughput up: not saturated
    assert saturation(90, 100, 100, 100) == -math.inf  # memory flat, throughput down: saturated


def test_paper_algorithm_finds_the_known_optimum():
    out = algorithm2(Analytic(), 4, NUM_ENVS, NUM_GPUS, alpha=0.05)
    assert (out.num_envs, out.gmis_per_gpu) == OPTIMUM
    assert out.estimate == pytest.approx(35.0 * 1024 * 3 * NUM_GPUS)


def test_paper_algorithm_stops_each_gmi_size_one_step_past_its_knee():
    prof = Analytic()
    out = algorithm2(prof, 4, NUM_ENVS, NUM_GPUS, alpha=0.05)
    for g, knee in KNEE.items():
        visited = [n for gg, n in prof.calls if gg == g]
        assert visited[-1] == 2 * knee  # the first point past the knee shows Sat = 0 < alpha
        assert [s.decision for s in out.steps if s.gmis_per_gpu == g][-1] == "saturated"
    # G4: crash, init, 1 candidate, stop = 4; G3: 5; G2: 6; G1: 7.
    assert out.profiles == len(prof.calls) == 22
    assert out.profile_s == pytest.approx(sum(n / 128 for g, n in prof.calls if (g, n) not in CRASH) + 1.0)


def test_paper_algorithm_skips_unrunnable_and_never_estimates_the_first_runnable_point():
    out = algorithm2(Analytic(), 4, NUM_ENVS, NUM_GPUS, alpha=0.05)
    g4 = [s for s in out.steps if s.gmis_per_gpu == 4]
    assert [s.decision for s in g4] == ["unrunnable", "init", "best", "saturated"]
    assert g4[1].estimate is None


def test_paper_algorithm_goes_from_max_gmis_down_to_one():
    prof = Analytic()
    algorithm2(prof, 4, NUM_ENVS, NUM_GPUS, alpha=0.05)
    order = [g for i, (g, _) in enumerate(prof.calls) if i == 0 or prof.calls[i - 1][0] != g]
    assert order == [4, 3, 2, 1]


def test_high_alpha_stops_earlier():
    # Below the knee Sat = 1 / (n/8 / (100 + n/8)) > 1; an alpha above that stops at the second point.
    prof = Analytic()
    out = algorithm2(prof, 1, NUM_ENVS, NUM_GPUS, alpha=100.0)
    assert prof.calls == [(1, 128), (1, 256)]
    assert not out.found


def test_grid_profiles_every_point_and_agrees():
    prof = Analytic()
    out = grid(prof, 4, NUM_ENVS, NUM_GPUS)
    assert out.profiles == len(prof.calls) == 4 * len(NUM_ENVS)
    # Flat after the knee: the grid keeps the first (smallest) num_envs reaching the maximum.
    assert (out.num_envs, out.gmis_per_gpu) == OPTIMUM


def test_search_costs_less_than_grid():
    search = algorithm2(Analytic(), 4, NUM_ENVS, NUM_GPUS, 0.05)
    full = grid(Analytic(), 4, NUM_ENVS, NUM_GPUS)
    assert search.profile_s < full.profile_s / 2


def test_cn_variant_visits_powers_of_two_upwards():
    prof = Analytic()
    out = algorithm2_cn(prof, 4, NUM_ENVS, NUM_GPUS, alpha=0.05)
    assert sorted({g for g, _ in prof.calls}) == [1, 2, 4]
    assert [g for g, _ in prof.calls][0] == 1
    # G=3 is not in its space: the best it can find is G=2 at its knee (196,608 projected).
    assert (out.num_envs, out.gmis_per_gpu) == (2048, 2)


def test_cn_variant_estimates_the_first_runnable_point():
    prof = Analytic()
    out = algorithm2_cn(prof, 1, NUM_ENVS, NUM_GPUS, alpha=100.0)
    assert out.steps[0].decision == "best"
    assert (out.num_envs, out.gmis_per_gpu) == (128, 1)


class Plateau:
    """One GMI size whose throughput rises 20% per doubling to N=1024, then creeps up 2% per doubling
    while memory barely moves: Sat stays far above alpha, so only the noise floor stops the row."""

    def __init__(self):
        self.calls = []

    def __call__(self, g, n):
        self.calls.append(n)
        steps = NUM_ENVS.index(n)
        top = 1000 * 1.2 ** min(steps, 3) * 1.02 ** max(0, steps - 3)
        return ProfileResult(True, top=top, mem_mb=100 + steps * 0.1, wall_s=n / 128)


@pytest.mark.parametrize("search", [algorithm2, algorithm2_cn])
def test_min_gain_stops_a_row_whose_gain_is_below_the_noise_floor(search):
    literal, floored = Plateau(), Plateau()
    search(literal, 1, NUM_ENVS, NUM_GPUS, alpha=0.05)
    out = search(floored, 1, NUM_ENVS, NUM_GPUS, alpha=0.05, min_gain=0.05)
    assert literal.calls == NUM_ENVS  # the paper's rule alone climbs to the most expensive point
    assert floored.calls == NUM_ENVS[:5]  # 1024 is the last 20% gain; 2048 (+2%) stops the row
    assert out.num_envs == 1024 and out.steps[-1].decision == "saturated"


def test_min_gain_zero_is_the_papers_rule():
    a, b = Analytic(), Analytic()
    assert algorithm2(a, 4, NUM_ENVS, NUM_GPUS, 0.05).steps == algorithm2(b, 4, NUM_ENVS, NUM_GPUS, 0.05, 0.0).steps
