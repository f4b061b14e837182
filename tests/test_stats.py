"""gmiexp.stats: the steady rate of run rows and the paired comparison, on hand-worked values."""

from __future__ import annotations

import math

import pytest

from gmiexp.stats import (
    Gain,
    Sample,
    Z,
    contrast_weights,
    epoch_rates,
    last_episodes,
    mean_curve,
    mean_interval,
    paired_differences,
    paired_gain,
    remeasured_sd,
    rotated,
    steady_rate,
    t95,
    time_to_return,
    value_at,
)


def rows(*frames_wall: tuple[float, float], **extra: float) -> list[dict[str, float]]:
    return [{"frames": f, "wall_s": w, **extra} for f, w in frames_wall]


# --- steady rate --------------------------------------------------------------------------------------------------

def test_the_summary_rule_leaves_the_first_epoch_out_when_two_follow_it() -> None:
    run = rows((100, 2.0), (200, 3.0), (300, 4.0), (400, 5.0))  # a 2 s first epoch (start-up), then 100 frames/s
    assert steady_rate(run) == pytest.approx((400 - 100) / (5.0 - 2.0))  # 100
    assert steady_rate(run[:3]) == pytest.approx((300 - 100) / (4.0 - 2.0))  # 100
    assert steady_rate(run[:2]) == pytest.approx(200 / 3.0)  # too few: all epochs, from the clock's origin
    assert steady_rate(run[:1]) == pytest.approx(100 / 2.0)
    assert steady_rate([]) == 0.0


def test_per_epoch_frames_add_up_as_cumulative_ones_do() -> None:
    per_epoch = rows((100, 2.0), (100, 3.0), (100, 4.0), (100, 5.0))
    assert steady_rate(per_epoch, cumulative=False) == pytest.approx(300 / 3.0)
    assert steady_rate(per_epoch[:2], cumulative=False) == pytest.approx(200 / 3.0)
    local = [{"local_frames": 50, "wall_s": w} for w in (1.0, 2.0, 4.0)]
    assert steady_rate(local, "local_frames", cumulative=False) == pytest.approx(100 / 3.0)  # (50 + 50) / (4 - 1)


def test_skip_and_last_pick_the_epochs_measured() -> None:
    run = rows((100, 10.0), (200, 11.0), (300, 12.0), (400, 13.0))
    assert steady_rate(run, skip=1, last=2) == pytest.approx(100.0)  # rows 2 -> 4: 200 frames in 2 s
    assert steady_rate(run[:2], skip=1, last=2) == 0.0  # one epoch after the first: not a window of two
    assert steady_rate(run, skip=2) == pytest.approx((400 - 200) / (13.0 - 11.0))
    assert steady_rate(run, skip=0) == pytest.approx(400 / 13.0)  # from the origin: frames 0 at wall_s 0
    assert steady_rate(run, skip=4) == 0.0  # nothing left
    assert steady_rate(rows((100, 1.0), (200, 1.0)), skip=1) == 0.0  # no time passed


def test_the_median_ignores_one_stalled_epoch_the_span_does_not() -> None:
    run = rows(*[(1000.0 * i, float(i) + (0.5 if i >= 6 else 0.0)) for i in range(1, 9)])  # epoch 6 stalled 0.5 s
    assert steady_rate(run, skip=2, median=True) == pytest.approx(1000.0)  # epochs 3..8: 1000 each, epoch 6 1000/1.5
    assert steady_rate(run, skip=2) == pytest.approx(6000 / 6.5)
    assert steady_rate(run[:2], skip=2, median=True) == 0.0


def test_epoch_rates_are_each_epoch_s_own() -> None:
    run = rows((0, 0.0), (100, 1.0), (300, 2.0), (400, 4.0))
    assert epoch_rates(run, skip=1, last=2) == [200.0, 50.0]
    assert epoch_rates(run, skip=1) == [100.0, 200.0, 50.0]
    assert epoch_rates(run, skip=1, last=4) == []
    assert epoch_rates(rows((0, 0.0), (100, 1.0), (200, 1.0)), skip=1) == [100.0]  # an epoch of no time is dropped


# --- paired comparison --------------------------------------------------------------------------------------------

def sides(pattern: str, t: list[float] | None = None) -> list[Sample]:
    """Samples of log rate 0 for a pattern such as "ABA" (B: the candidate)."""
    return [Sample(c == "B", 0.0, 0.0, t[i] if t else None) for i, c in enumerate(pattern)]


def test_contrast_weights_by_hand() -> None:
    assert contrast_weights(sides("AB")) == [-1.0, 1.0]  # no bracketed measurement: the difference of means
    assert contrast_weights(sides("AAB")) == [-0.5, -0.5, 1.0]
    assert contrast_weights(sides("ABA")) == [-0.5, 1.0, -0.5]  # B - (A1 + A2) / 2
    # two contrasts, B1 - (A1 + A2) / 2 and (B1 + B2) / 2 - A2, averaged
    assert contrast_weights(sides("ABAB")) == pytest.approx([-0.25, 0.75, -0.75, 0.25])
    # B at t=3 between A's at 0 and 4: A(3) = A1 / 4 + 3 A2 / 4
    assert contrast_weights(sides("ABA", [0.0, 3.0, 4.0])) == pytest.approx([-0.25, 1.0, -0.75])
    with pytest.raises(ValueError, match="both sides"):
        contrast_weights(sides("AA"))


def test_the_gain_of_an_a_b_a_pair_and_its_standard_error() -> None:
    a1, b, a2 = Sample(False, math.log(100.0)), Sample(True, math.log(110.0)), Sample(False, math.log(90.0))
    g = paired_gain([a1, b, a2])
    assert g.log == pytest.approx(math.log(110) - (math.log(100) + math.log(90)) / 2) and g.se == 0.0
    assert g.ratio == pytest.approx(110 / math.sqrt(100 * 90))
    var = [Sample(s.candidate, s.log_rate, v) for s, v in zip((a1, b, a2), (0.04, 0.01, 0.04), strict=True)]
    assert paired_gain(var).se == pytest.approx(math.sqrt(0.01 + 0.04 / 4 + 0.04 / 4))  # 0.1732
    assert paired_gain(var[:2]).se == pytest.approx(math.sqrt(0.04 + 0.01))  # A-B: both variances in full


def test_a_linear_drift_cancels_in_a_bracketed_pair_and_leaks_into_a_plain_one() -> None:
    def drifting(pattern: str, drift: float) -> list[Sample]:
        return [Sample(c == "B", math.log(120.0 if c == "B" else 100.0) + drift * t, 0.0, float(t))
                for t, c in enumerate(pattern)]

    assert paired_gain(drifting("ABA", 0.1)).ratio == pytest.approx(1.2)
    assert paired_gain(drifting("ABAB", -0.3)).ratio == pytest.approx(1.2)
    assert paired_gain(drifting("AB", 0.1)).ratio == pytest.approx(1.2 * math.exp(0.1))


def test_a_window_s_sample_is_its_epochs_mean_log_and_that_mean_s_variance() -> None:
    s = Sample.of_rates(True, [100.0, 120.0], t=2.0)
    d = math.log(1.2)
    assert s.log_rate == pytest.approx(math.log(100.0) + d / 2)
    assert s.var == pytest.approx((d**2 / 2) / 2)  # sample variance (n - 1 = 1) over n = 2
    assert (s.candidate, s.t) == (True, 2.0)
    assert Sample.of_rates(False, [100.0, 0.0]).var == 0.0  # one positive rate: no spread
    with pytest.raises(ValueError):
        Sample.of_rates(False, [0.0])


def test_a_profile_s_sample_has_half_the_variance_of_a_re_measurement_difference() -> None:
    s = Sample.of_rate(False, 100.0, difference_sd=0.1)
    assert s.log_rate == pytest.approx(math.log(100.0)) and s.var == pytest.approx(0.005)
    # A-B-A with that noise: 0.005 * (1/4 + 1 + 1/4)
    g = paired_gain([s, Sample.of_rate(True, 120.0, 0.1), Sample.of_rate(False, 100.0, 0.1)])
    assert g.se == pytest.approx(math.sqrt(0.0075))


def test_a_candidate_beats_the_incumbent_by_z_standard_errors_and_the_floor() -> None:
    assert Z == 2.0
    assert Gain(0.10, 0.04).beats(floor=math.log1p(0.05))  # 0.10 > max(0.0488, 0.08)
    assert not Gain(0.10, 0.06).beats(floor=math.log1p(0.05))  # 0.10 < 2 * 0.06
    assert not Gain(0.10, 0.0).beats(floor=0.11)  # no noise: the floor alone
    assert Gain(0.10, 0.0).beats()
    assert Gain(0.10, 0.06).beats(z=1.0) and not Gain(0.10, 0.04).beats(z=3.0)
    assert not Gain(0.0, 0.0).beats()  # strictly more


def test_remeasured_sd_pools_the_differences_with_a_prior() -> None:
    d = math.log(1.1)
    assert remeasured_sd([d]) == pytest.approx(d)
    assert remeasured_sd([d, -d, 0.0]) == pytest.approx(math.sqrt(2 * d * d / 3))
    assert remeasured_sd([d], prior=0.1, weight=1.0) == pytest.approx(math.sqrt((0.01 + d * d) / 2))
    assert remeasured_sd([], prior=0.1, weight=1.0) == pytest.approx(0.1)
    assert remeasured_sd([]) == 0.0


def test_last_episodes_take_the_newest_across_gmis_in_the_order_they_ended() -> None:
    hist = {0: [{"episodes/returns": [1.0, 2.0]}, {"episodes/returns": [5.0]}],
            1: [{"episodes/returns": [3.0]}, {"episodes/returns": []}, {"episodes/returns": [7.0, 8.0]}]}
    assert last_episodes(hist, 100) == [1.0, 2.0, 3.0, 5.0, 7.0, 8.0]
    assert last_episodes(hist, 4) == [3.0, 5.0, 7.0, 8.0]
    assert last_episodes({0: [{}]}, 4) == []


def test_time_to_a_return_and_the_return_at_equal_frames() -> None:
    rows = [{"wall_s": 1.0, "frames": 10, "reward/mean": None}, {"wall_s": 2.0, "frames": 20, "reward/mean": 5.0},
            {"wall_s": 3.0, "frames": 30, "reward/mean": 9.0}]
    assert time_to_return(rows, 5.0) == 2.0 and time_to_return(rows, 9.0, x="frames") == 30.0
    assert time_to_return(rows, 10.0) is None
    assert value_at(rows, 25) == 5.0 and value_at(rows, 10) is None and value_at(rows, 2.5, x="wall_s") == 5.0


# --- paired differences -------------------------------------------------------------------------------------------

def test_the_t_interval_of_paired_differences_by_hand() -> None:
    # mean 3, sd sqrt(2.5), se sqrt(0.5); t(4) = 2.776 -> half 1.963: 0 lies outside
    iv = mean_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert iv.mean == 3.0 and iv.n == 5
    assert iv.half == pytest.approx(2.776 * math.sqrt(0.5))
    assert iv.low == pytest.approx(3.0 - 1.9629, abs=1e-4) and iv.contains(0.0) is False and iv.contains(2.0)
    # differences of either sign: mean 0.5, sd sqrt(4.75), se 1.2583; t(2) = 4.303 -> half 5.414
    wide = mean_interval([-1.0, 3.0, -0.5])
    assert wide.half == pytest.approx(4.303 * math.sqrt(4.75 / 3)) and wide.contains(0.0)
    one = mean_interval([4.0])
    assert one.half is None and one.contains(0.0) is None and one.low is None


def test_t95_is_the_table_and_its_large_sample_approximation() -> None:
    assert t95(1) == 12.706 and t95(4) == 2.776 and t95(30) == 2.042
    assert t95(60) == pytest.approx(2.000, abs=1e-3) and t95(120) == pytest.approx(1.980, abs=1e-3)
    assert t95(31) < t95(30)
    with pytest.raises(ValueError):
        t95(0)


# --- interleaved, paired studies ----------------------------------------------------------------------------------

def test_paired_differences_take_seed_by_seed_where_both_have_a_value() -> None:
    at = {(1, "a"): 10.0, (1, "b"): 12.0, (2, "a"): 20.0, (2, "b"): 19.0, (3, "a"): None, (3, "b"): 7.0,
          (10, "a"): 1.0, (10, "b"): 5.0}
    assert paired_differences(at, "a", "b") == [2.0, -1.0, 4.0]  # seed 3 has no "a"; 10 after 2 (numbers sort)
    assert paired_differences(at, "b", "a") == [-2.0, 1.0, -4.0]
    assert paired_differences(at, "a", "c") == []


def test_each_seed_runs_the_variants_rotated_by_its_index() -> None:
    assert rotated([1, 2, 4], 0) == [1, 2, 4] and rotated([1, 2, 4], 1) == [2, 4, 1]
    assert rotated([1, 2, 4], 5) == [4, 1, 2] and rotated([], 3) == []
    firsts = [rotated(["f1", "f2", "r"], k)[0] for k in range(6)]
    assert sorted(firsts) == ["f1", "f1", "f2", "f2", "r", "r"]


def test_the_mean_curve_stops_at_the_shortest_seed_and_holds_each_seed_s_last_value() -> None:
    assert mean_curve([[(1.0, 0.0), (2.0, 4.0), (3.0, 8.0)], [(1.0, 2.0), (2.0, 6.0)]]) == [(1.0, 1.0), (2.0, 5.0)]
    # seconds: the seeds' epochs end at different times; each contributes its last value at or before the grid's x
    assert mean_curve([[(1.5, 1.0), (3.0, 3.0)], [(1.0, 5.0), (2.5, 7.0), (4.0, 9.0)], []]) == [(1.5, 3.0),
                                                                                             (3.0, 5.0)]
    assert mean_curve([[(2.0, 1.0)], [(3.0, 2.0)]]) == []  # the second seed has nothing at x=2
