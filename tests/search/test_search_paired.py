"""The paired search: drift-cancelling contrasts, its noise model and decisions, and a simulated noisy host."""

import math
import statistics

import pytest
from noisy_host import MAX_GMIS, NUM_ENVS, NoisyHost, cost

from gmiexp.errors import ConfigError
from gmiexp.search import ProfileResult, SearchOutcome, algorithm2, grid
from gmiexp.search.algorithm import Step
from gmiexp.search.paired import (
    Ledger,
    Measurement,
    PairRule,
    compare,
    gain_threshold,
    grid_cost,
    launch_and_steps,
    log_ratio,
    measured_launch_steps,
    paired_search,
    warm_start,
)

A, B = (1, 128), (1, 256)


def drifting(points_and_rates, drift=0.1):
    """Measurements one time unit apart on a host whose log speed grows by ``drift`` per unit."""
    return [Measurement(p, float(t), rate * math.exp(drift * t), 10.0, t) for t, (p, rate) in
            enumerate(points_and_rates)]


def test_sandwich_cancels_linear_drift_that_biases_a_plain_pair():
    one_sided = drifting([(A, 100.0), (B, 120.0)])
    assert log_ratio(one_sided, A, 0.1).ratio == pytest.approx(1.2 * math.exp(0.1))  # drift leaks in
    assert log_ratio(drifting([(A, 100.0), (B, 120.0), (A, 100.0)]), A, 0.1).ratio == pytest.approx(1.2)
    abab = drifting([(A, 100.0), (B, 120.0), (A, 100.0), (B, 120.0)], drift=-0.3)
    assert log_ratio(abab, A, 0.1).ratio == pytest.approx(1.2)


def test_contrasts_interpolate_at_unequal_times():
    speed = [math.exp(0.1 * t) for t in range(5)]  # log speed linear in time
    seq = [Measurement(A, 0.0, 100.0 * speed[0], 1, 0), Measurement(B, 3.0, 130.0 * speed[3], 1, 1),
           Measurement(A, 4.0, 100.0 * speed[4], 1, 2)]
    assert log_ratio(seq, A, 0.1).ratio == pytest.approx(1.3)


def test_standard_error_shrinks_with_profiles_of_both_points():
    """Each profile's variance is half the re-measurement difference's (0.1**2 / 2); the contrasts weigh the profiles
    A-B (-1, 1), A-B-A (-1/2, 1, -1/2), A-B-A-B (-1/4, 3/4, -3/4, 1/4): sums of squared weights 2, 1.5, 1.25."""
    seq = drifting([(A, 1.0), (B, 1.0), (A, 1.0), (B, 1.0)])
    assert log_ratio(seq[:2], A, 0.1).se == pytest.approx(0.1)
    assert log_ratio(seq[:3], A, 0.1).se == pytest.approx(0.1 * math.sqrt(0.75))
    assert log_ratio(seq, A, 0.1).se == pytest.approx(0.1 * math.sqrt(0.625))


class Scripted:
    """profile(G, N, length) from fixed per-point rates times a per-call factor; records lengths."""

    def __init__(self, rates, factors=(), mem=None):
        self.rates, self.factors, self.calls = rates, list(factors), []
        self.mem = mem or {}

    def __call__(self, g, n, length=1.0):
        self.calls.append(((g, n), length))
        f = self.factors.pop(0) if self.factors else 1.0
        return ProfileResult(True, top=self.rates[(g, n)] * f / g, mem_mb=self.mem.get((g, n), 100.0), wall_s=1.0)


def ledger(profile, budget=1e9, length=0.5):
    return Ledger(profile, lambda g, n, length: 1.0, budget, length, SearchOutcome(method="paired"))


def flat(seq):
    return 0.0


def test_difference_sd_pools_the_search_own_re_measurements():
    led = ledger(Scripted({A: 100.0, B: 200.0}, factors=[1.0, 1.0, 1.1]))
    for p in (A, B, A):
        led.measure(p, "pair")
    assert led.difference_sd(prior=0.0, weight=0.0) == pytest.approx(math.log(1.1))
    assert led.difference_sd(prior=0.1, weight=1.0) == pytest.approx(math.sqrt((0.01 + math.log(1.1) ** 2) / 2))


def test_a_clear_gain_is_decided_on_two_back_to_back_profiles():
    led = ledger(Scripted({A: 100.0, B: 150.0}))
    led.measure(A, "init")
    c = compare(led, PairRule.of(), "num_envs", A, B, flat)
    assert (c.decision, c.reason, len(c.measurements)) == ("candidate", "decisive", 2)
    assert c.ratio == pytest.approx(1.5)


def test_a_difference_inside_the_noise_is_measured_again_alternately_until_the_limit():
    prof = Scripted({A: 100.0, (2, 64): 103.0})
    led = ledger(prof)
    led.measure(A, "init")
    c = compare(led, PairRule.of(max_profiles_gmis=5), "gmis", A, (2, 64), flat)
    assert [p for p, _ in prof.calls] == [A, (2, 64), A, (2, 64), A]
    assert c.reason == "out of profiles" and c.decision == "incumbent"  # undecided: 3% is not 5% faster
    assert {length for _, length in prof.calls} == {0.5}


def test_a_num_envs_step_that_cannot_become_decisive_is_not_measured_again():
    """3% apart with a 10% noise prior: even four profiles could not separate them (futile), so the row
    climbs on at once; 30% apart is decisive on the same two profiles."""
    for rate, reason in ((103.0, "futile"), (130.0, "decisive")):
        prof = Scripted({A: 100.0, B: rate})
        led = ledger(prof)
        led.measure(A, "init")
        c = compare(led, PairRule.of(), "num_envs", A, B, flat)
        assert (c.reason, c.decision, len(prof.calls)) == (reason, "candidate", 2)


def test_undecided_steps_favour_a_larger_num_envs_and_fewer_gmis():
    for kind, inc, cand, rate, want in [("num_envs", A, B, 97.0, "candidate"), ("num_envs", A, B, 90.0, "incumbent"),
                                        ("num_envs", B, A, 103.0, "incumbent"), ("gmis", A, (2, 64), 103.0,
                                                                                 "incumbent"),
                                        ("gmis", A, (2, 64), 108.0, "candidate")]:
        led = ledger(Scripted({inc: 100.0, cand: rate}))
        rule = PairRule.of(max_profiles=3, max_profiles_gmis=3, min_profiles=2, min_profiles_gmis=2, noise=0.5)
        c = compare(led, rule, kind, inc, cand, flat)
        reason = "futile" if kind == "num_envs" else "out of profiles"
        assert (c.reason, c.decision) == (reason, want), (kind, rate)


def test_a_verdict_that_ends_a_climb_or_switches_gmis_waits_for_a_bracketed_sequence():
    """Seen live: one profile 43% below its point's others decided a GMI count on a single pair, and one noisy
    pair stopped a row short of its knee. Continuing a climb may rest on one pair; stopping needs A-B-A, and a
    decision between GMI counts A-B-A-B, where the slow spell shows up as noise instead of as a difference."""
    cases = [("num_envs", B, 150.0, "candidate", 2), ("num_envs", B, 60.0, "incumbent", 3),
             ("gmis", (2, 64), 150.0, "candidate", 4), ("gmis", (2, 64), 60.0, "incumbent", 4)]
    for kind, cand, rate, want, profiles in cases:
        led = ledger(Scripted({A: 100.0, cand: rate}))
        led.measure(A, "init")
        c = compare(led, PairRule.of(), kind, A, cand, flat)
        assert (c.decision, c.reason, len(c.measurements)) == (want, "decisive", profiles), (kind, rate)
    # The live case: the incumbent's one slow profile makes a 20% slower candidate look 40% faster after one pair.
    led = ledger(Scripted({A: 175.0, (2, 64): 140.0}, factors=[1.0, 0.57]))
    led.measure((2, 64), "init")  # the row's best, then the best so far re-measured in a slow spell
    c = compare(led, PairRule.of(), "gmis", A, (2, 64), flat)
    assert c.decision == "incumbent" and len(c.measurements) > 2


def test_a_point_that_does_not_run_loses_its_comparison():
    def flaky(g, n, length):
        return ProfileResult((g, n) != B, top=100.0, mem_mb=1.0, wall_s=1.0)

    led = ledger(flaky)
    led.measure(A, "init")
    assert compare(led, PairRule.of(), "num_envs", A, B, flat).decision == "unrunnable"  # the row skips B
    led.measure(A, "init")
    c = compare(led, PairRule.of(), "gmis", B, A, flat)  # the best so far no longer runs: the candidate takes over
    assert (c.decision, c.reason) == ("candidate", "unrunnable")


def test_a_comparison_stops_at_the_budget():
    prof = Scripted({A: 100.0, B: 103.0})
    led = Ledger(prof, lambda g, n, length: 10.0, 35.0, 0.5, SearchOutcome(method="paired"))
    led.measure(A, "init")
    c = compare(led, PairRule.of(max_profiles_gmis=8), "gmis", A, B, flat)
    assert c.reason == "out of budget" and len(prof.calls) == 3 and led.spent == 30.0


def test_gain_threshold_is_the_papers_sat_rule():
    mem = {A: 100.0, B: 150.0}
    seq = [Measurement(A, 0, 1, mem[A], 0), Measurement(B, 1, 1, mem[B], 1)]
    assert gain_threshold(0.1, 0.0)(seq) == pytest.approx(0.1 * 0.5)  # R_top must reach alpha * R_mem
    assert gain_threshold(0.1, 0.0)(seq[::-1]) == pytest.approx(0.05)  # the larger num_envs' gain either way
    same = [Measurement(A, 0, 1, 100.0, 0), Measurement(B, 1, 1, 100.0, 1)]
    assert gain_threshold(0.1, 0.0)(same) == 0.0 and gain_threshold(0.1, 0.03)(same) == 0.03


def test_warm_start_keeps_the_devices_env_count():
    envs = [128, 256, 512, 1024, 2048]
    assert warm_start(envs, (1, 2048), 2) == envs.index(1024)
    assert warm_start(envs, (2, 1024), 3) == envs.index(512)
    assert warm_start(envs, (1, 128), 2) == 0


# A noise-free surface with a known optimum (as in test_search_algorithm): per-GMI top grows to a knee.
KNEE = {4: 512, 3: 1024, 2: 2048, 1: 4096}
RATE = {4: 30.0, 3: 35.0, 2: 24.0, 1: 20.0}
SPACE = [128, 256, 512, 1024, 2048, 4096, 8192, 16384]


def analytic(g, n, length=1.0):
    if (g, n) == (4, 128):
        return ProfileResult(False, wall_s=1.0, error="crash")
    return ProfileResult(True, top=RATE[g] * min(n, KNEE[g]), mem_mb=100 + n / 8, wall_s=n / 128 * length)


def test_paired_finds_the_known_optimum_and_records_every_decision():
    """Rows climb while the gain is decisive; on the flat part past a knee the noise prior leaves steps
    undecided, and an undecided row climbs (any point of the plateau has the optimum's throughput)."""
    price = launch_and_steps(lambda g, n, length: g * n * length, 0.0)
    out = paired_search(analytic, 4, SPACE, 2, alpha=0.05, cost=price, rule=PairRule.of(budget=1.0))
    assert out.gmis_per_gpu == 3 and out.num_envs >= 1024
    assert out.estimate == pytest.approx(35.0 * 1024 * 3 * 2)
    decided = [(c["kind"], c["candidate"][0], c["decision"], c["reason"]) for c in out.comparisons
               if c["kind"] == "gmis"]
    assert decided == [("gmis", 2, "candidate", "decisive"), ("gmis", 3, "candidate", "decisive"),
                       ("gmis", 4, "incumbent", "decisive")]
    climb = [c for c in out.comparisons if c["kind"] == "num_envs" and c["candidate"][0] == 1]
    assert [c["ratio"] for c in climb[:5]] == pytest.approx([2.0] * 5)  # linear below G1's knee at 4096
    assert out.cost["spent_profile_steps"] <= out.cost["budget_profile_steps"]
    assert all(s.decision in ("init", "candidate", "pair", "saturated", "best", "unrunnable") for s in out.steps)


def test_measured_launch_is_wall_time_beyond_the_steps_at_the_measured_rate():
    out = SearchOutcome(method="paired")
    for wall in (7.0, 9.0, 30.0):  # 1000 steps at 500/s take 2 s: launches of 5, 7 and 28 s
        out.record(Step(2, 100, ProfileResult(True, top=250.0, wall_s=wall), "pair", length=0.5))
    out.record(Step(2, 200, ProfileResult(False, wall_s=3.0), "unrunnable"))
    assert measured_launch_steps(out, lambda g, n, length: g * n * 10 * length) == pytest.approx(7 * 500)


def test_a_space_too_small_for_the_budget_is_refused_by_name():
    """Two points whose launch dominates their cost: the budget cannot buy one profile, so the search says so
    (exit 2) instead of ending with no pick (seen with the slow suite's two-point mjlab search)."""
    price = launch_and_steps(lambda g, n, length: g * n * length, 500.0)
    with pytest.raises(ConfigError, match="search.budget"):
        paired_search(analytic, 1, [16, 32], 1, alpha=0.05, cost=price)


def test_budget_is_a_fraction_of_the_grids_modelled_cost():
    price = launch_and_steps(lambda g, n, length: g * n * length, 500.0)
    assert grid_cost(price, 2, [128, 256]) == pytest.approx(128 + 256 + 256 + 512 + 4 * 500)
    for budget in (0.2, 0.45):
        out = paired_search(analytic, 4, SPACE, 1, alpha=0.05, cost=price, rule=PairRule.of(budget=budget))
        assert out.cost["cost_ratio_model"] <= budget


# The simulated noisy host: drift 20-40% over minutes, 5-10% noise per profile (tests/helpers/noisy_host.py).
SEEDS = range(100)


def trial(seed, search):
    reference = NoisyHost(seed)
    grid(lambda g, n: reference(g, n), MAX_GMIS, NUM_ENVS, 1, 0.05)
    host = NoisyHost(seed)
    out = search(host)
    return host.quality(out.gmis_per_gpu, out.num_envs), host.clock / reference.clock, out


def run_paired(host):
    return paired_search(host, MAX_GMIS, NUM_ENVS, 1, 0.05, cost=cost)


def run_paper(host):
    return algorithm2(lambda g, n: host(g, n), MAX_GMIS, NUM_ENVS, 1, 0.05)


def test_noisy_host_drifts_and_is_noisy_as_specified():
    host = NoisyHost(3)
    speeds = [host.speed(t) for t in range(0, 1200, 5)]
    assert 0.15 <= max(speeds) - min(speeds) <= 0.45
    assert 0.05 <= host.sigma <= 0.1


def test_paired_search_survives_the_noisy_host_where_the_papers_rule_does_not():
    """Seen on these 100 seeds: paired 97 within 5% of the true best (94 before consequential verdicts waited
    for a bracketed sequence), every one at <= 45% of the grid's modelled cost and a median 39% of its
    simulated wall time; the paper's rule 51 within 5%, 31
    meeting both bars (its median wall time is 49% of the grid's). Asserted with margin."""
    paired_runs = [trial(s, run_paired) for s in SEEDS]
    paper_runs = [trial(s, run_paper) for s in SEEDS]
    good = [q >= 0.95 for q, _, _ in paired_runs]
    assert sum(good) >= 80
    assert all(out.cost["cost_ratio_model"] <= 0.45 for _, _, out in paired_runs)
    assert statistics.median(wall for _, wall, _ in paired_runs) <= 0.5
    assert sum(q >= 0.95 and wall <= 0.5 for q, wall, _ in paired_runs) >= 75
    assert sum(q >= 0.95 for q, _, _ in paper_runs) <= 70
    assert sum(q >= 0.95 and wall <= 0.5 for q, wall, _ in paper_runs) <= 50


def test_paired_search_on_a_quiet_host_always_finds_the_plateau():
    for seed in range(30):
        host = NoisyHost(seed, drift=(0.0, 0.0), noise=(0.01, 0.01))
        out = run_paired(host)
        assert host.quality(out.gmis_per_gpu, out.num_envs) >= 0.95, seed
