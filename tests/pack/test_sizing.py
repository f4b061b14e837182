"""jobs_per_gpu=auto: paired steps (incumbent, candidate, incumbent) decide each step up, by the gain and its noise."""

from __future__ import annotations

import math

import pytest

from gmiexp.pack import sizing


def profiler(totals: dict[int, float], calls: list[int]):
    def profile(k: int):
        calls.append(k)
        return totals.get(k, 0.0), []

    return profile


def test_takes_each_step_that_gains_and_stops_at_the_first_that_does_not() -> None:
    calls: list[int] = []
    said: list[str] = []
    out = sizing.choose(profiler({1: 100.0, 2: 150.0, 3: 152.0, 4: 300.0}, calls), 4, 0.05, said.append)
    assert out["jobs_per_gpu"] == 2
    assert calls == [1, 2, 1, 2, 3, 2]  # paired: A-B-A, then B-C-B; 4 never tried
    assert [s["ratio"] for s in out["steps"]] == [1.5, round(152 / 150, 3)]
    assert "jobs_per_gpu=2" in said[-1] and "paired ratio 1.013" in said[1]


def test_a_gain_inside_the_drift_of_the_pair_s_own_incumbent_runs_is_not_taken() -> None:
    """The incumbent ran 100 then 88 around a candidate at 112: a paired ratio of 112 / sqrt(100 * 88) = 1.194,
    well over min_gain, but the incumbent's re-measurement moved by log(88 / 100) = -0.128, so each run's noise
    is 0.128 / sqrt(2) and the A-B-A gain's standard error sqrt(1.5) times that, 0.111: 2 of them (0.221) exceed
    the gain (0.177). The same candidate around a steady incumbent is taken."""

    def sequence(totals: list[float]):
        def profile(k: int):
            return totals.pop(0), []

        return profile

    said: list[str] = []
    out = sizing.choose(sequence([100.0, 112.0, 88.0]), 2, 0.05, said.append)
    (step,) = out["steps"]
    assert out["jobs_per_gpu"] == 1 and step["ratio"] == round(112 / (100 * 88) ** 0.5, 3)
    assert step["noise"] == pytest.approx(math.sqrt(1.5 / 2) * abs(math.log(0.88)), abs=1e-4)
    assert "needs > 1.248" in said[0] and "keep 1" in said[0]
    assert sizing.choose(sequence([100.0, 112.0, 100.0]), 2, 0.05, lambda s: None)["jobs_per_gpu"] == 2


def test_a_candidate_that_does_not_run_keeps_the_incumbent() -> None:
    calls: list[int] = []
    out = sizing.choose(profiler({1: 100.0}, calls), 4, 0.05, lambda s: None)
    assert out["jobs_per_gpu"] == 1 and calls == [1, 2, 1]


def test_max_jobs_1_profiles_nothing() -> None:
    calls: list[int] = []
    assert sizing.choose(profiler({1: 100.0}, calls), 1, 0.05, lambda s: None)["jobs_per_gpu"] == 1
    assert calls == []


def test_profile_overrides_drop_what_a_profile_sets() -> None:
    kept = sizing.profile_overrides(["task=Cartpole", "max_iterations=50", "num_envs=64", "seed=3",
                                   "hardware.cpus=[0]", "launch.progress=false", "train.gamma=0.9"])
    assert kept == ["task=Cartpole", "seed=3", "train.gamma=0.9"]
