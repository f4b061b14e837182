"""Subprocess profiler against a fake CLI: summary parsing; crash, timeout and missing-summary detection."""

import json
import textwrap

import pytest
from gmitest import fake_python

from gmiexp.search.algorithm import ProfileResult
from gmiexp.search.profiler import SubprocessProfiler, result_from_summary, steady_throughput

HISTORY = [{"iteration": i, "wall_s": 1.0 + i, "frames": 1000 * i, "reward/mean": None,
            "perf/env_steps_per_s": 0.0} for i in range(1, 7)]


def test_steady_throughput_skips_warmup():
    hist = [dict(h) for h in HISTORY]
    hist[0]["wall_s"] = 10.0  # a slow first iteration (compilation, allocation) must not count
    for h in hist[1:]:
        h["wall_s"] += 9.0
    assert steady_throughput({"history": hist}, warmup_iterations=2) == pytest.approx(1000.0)


def test_steady_throughput_falls_back_to_summary_metric():
    assert steady_throughput({"history": [], "metrics": {"perf/env_steps_per_s": 42.0}}, 2) == 42.0


def test_result_is_per_gmi_and_prefers_the_gmis_own_peak_device_memory():
    # the GPUs' totals hold other jobs and a mean over time; the GMIs' NVML per-process peaks do not
    summary = {"status": "ok", "history": HISTORY,
               "metrics": {"mem/peak_rss_mb": 300.0, "gpu/0/mem_mb": 9000.0, "gpu/1/mem_mb": 30000.0,
                           "gmi/0/peak_mem_mb": 700.0, "gmi/1/peak_mem_mb": 900.0}}
    r = result_from_summary(summary, gmis=2, warmup_iterations=2, wall_s=3.0)
    assert r.runnable and r.top == pytest.approx(500.0) and r.mem_mb == pytest.approx(800.0)
    cpu = result_from_summary({**summary, "metrics": {"mem/peak_rss_mb": 300.0}}, 2, 2, 3.0)
    assert cpu.mem_mb == 300.0
    workload = result_from_summary({**summary, "metrics": {"mem/peak_rss_mb": 300.0, "mem/workload_mb": 12.5}},
                                   2, 2, 3.0)
    assert workload.mem_mb == 12.5


def test_failed_status_is_not_runnable():
    assert not result_from_summary({"status": "failed"}, 1, 2, 1.0).runnable


FAKE_CLI = textwrap.dedent("""
    import json, sys, time
    args = dict(a.split("=", 1) for a in sys.argv[3:])
    n, run_dir = int(args["num_envs"]), args["hydra.run.dir"]
    if n == 128:
        sys.exit(1)
    if n == 256:
        time.sleep(30)
    if n == 512:
        sys.exit(0)
    hist = [{"iteration": i, "wall_s": float(i), "frames": n * 16 * i} for i in range(1, 7)]
    json.dump({"status": "ok", "history": hist, "metrics": {"mem/peak_rss_mb": 100.0 + n}},
              open(run_dir + "/summary.json", "w"))
""")


@pytest.fixture
def profiler(tmp_path):
    return SubprocessProfiler(workdir=tmp_path / "runs", overrides=["task=Cartpole"], timeout_s=2.0,
                              python=fake_python(tmp_path, FAKE_CLI))


def test_command_line_carries_the_contract(profiler, tmp_path):
    cmd = profiler.command(2, 64, tmp_path)
    assert cmd[1:3] == ["-m", "gmiexp"]
    for part in ("mode=train", "num_gpus=1", "gmis_per_gpu=2", "num_envs=64", "max_iterations=6",
                 "launch.progress=false", "logger=none", "task=Cartpole", f"hydra.run.dir={tmp_path}"):
        assert part in cmd


def test_profiler_measures_a_good_run(profiler):
    r = profiler(2, 1024)
    assert r.runnable and r.top == pytest.approx(1024 * 16 / 2) and r.mem_mb == 1124.0


def test_a_re_measured_point_keeps_each_profile_apart(profiler, tmp_path):
    """The paired search profiles a point several times: each run keeps its own directory and summary."""
    for _ in range(3):
        assert profiler(2, 1024, 0.5).runnable
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert runs == ["G2_N1024", "G2_N1024_m1", "G2_N1024_m2"]
    assert all((tmp_path / "runs" / r / "summary.json").exists() for r in runs)


def test_length_scales_the_measured_window_and_the_cost_model(tmp_path):
    p = SubprocessProfiler(workdir=tmp_path, warmup_iterations=2, profile_iterations=4, min_profile_steps=200_000,
                           horizon_length=16)
    assert p.iterations(1, 128) == (49, 98) and p.iterations(1, 128, 0.5) == (25, 49)
    assert p.iterations(2, 16384, 0.5) == (1, 2)  # big points: half the iterations, at least one warm-up
    assert p.steps(2, 16384, 0.5) == 3 * 2 * 16384 * 16
    assert "max_iterations=3" in p.command(2, 16384, tmp_path, 0.5)


@pytest.mark.parametrize(("n", "why"), [(128, "exit code 1"), (256, "timeout"), (512, "no summary.json")])
def test_profiler_detects_failures(profiler, n, why):
    r = profiler(1, n)
    assert not r.runnable and why in r.error
    assert json.dumps(r.error)


def test_steady_throughput_is_robust_to_one_stalled_iteration():
    hist = [{"iteration": i, "frames": 1000 * i, "wall_s": float(i)} for i in range(1, 9)]
    for h in hist[5:]:
        h["wall_s"] += 0.5  # iteration 6 stalled for half a second (another process took the core)
    assert steady_throughput({"history": hist}, warmup_iterations=2) == pytest.approx(1000.0)


def test_small_points_measure_at_least_min_profile_steps(tmp_path):
    """A 128-env point runs more iterations (warm-up in proportion); big points keep the minimum."""
    p = SubprocessProfiler(workdir=tmp_path, warmup_iterations=3, profile_iterations=10, min_profile_steps=200_000,
                           horizon_length=16)
    warmup, measured = p.iterations(2, 128)
    assert measured == 49 and measured * 2 * 128 * 16 >= 200_000
    assert warmup == 15
    assert p.iterations(1, 16384) == (3, 10)
    assert "max_iterations=64" in p.command(2, 128, tmp_path)
    assert SubprocessProfiler(workdir=tmp_path, min_profile_steps=0).iterations(1, 128) == (2, 4)


def test_repeats_keep_the_fastest_run_and_sum_the_cost(tmp_path, monkeypatch):
    """Interference only slows a run down: of several profiles of a point the fastest is kept."""
    p = SubprocessProfiler(workdir=tmp_path, repeats=3)
    tops = iter([5.0, 9.0, 7.0])
    monkeypatch.setattr(p, "_once", lambda g, n, k, length: ProfileResult(True, top=next(tops), mem_mb=1.0, wall_s=2.0))
    r = p(2, 128)
    assert r.runnable and r.top == 9.0 and r.wall_s == 6.0
    results = iter([ProfileResult(True, top=5.0, wall_s=2.0), ProfileResult(False, wall_s=1.0, error="exit code 1")])
    monkeypatch.setattr(p, "_once", lambda g, n, k, length: next(results))
    r = p(2, 256)
    assert not r.runnable and r.error == "exit code 1" and r.wall_s == 3.0
