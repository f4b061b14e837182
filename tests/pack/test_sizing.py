"""jobs_per_gpu=auto: paired steps (incumbent, candidate, incumbent) decide each step up."""

from __future__ import annotations

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
