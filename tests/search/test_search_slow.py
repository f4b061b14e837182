"""Real mode=search through the CLI on CPU with torch Cartpole and a tiny grid (slow suite)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ["task=Cartpole", "search.max_gmis_per_gpu=2", "search.num_envs=[32,64,128]", "search.warmup_iterations=1",
        "search.profile_iterations=2", "search.min_profile_steps=0", "search.timeout_s=120"]


def gmiexp(*args, env):
    return subprocess.run([sys.executable, "-m", "gmiexp", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow
def test_real_search_then_preset_runs(tmp_path):
    env = {**os.environ, "GMIEXP_CACHE_DIR": str(tmp_path / "cache"), "GMIEXP_PRESET_DIR": str(tmp_path / "p")}
    paper = ["search.variant=paper"]  # the cached variant: a rerun profiles nothing
    r = gmiexp("mode=search", *TINY, *paper, "search.output=tiny.yaml", f"hydra.run.dir={tmp_path / 's'}", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((tmp_path / "s" / "search.json").read_text())
    assert report["status"] == "ok" and report["profiles"] >= 2
    assert "+preset=tiny" in r.stdout
    again = gmiexp("mode=search", *TINY, *paper, "search.output=tiny.yaml", f"hydra.run.dir={tmp_path / 's2'}",
                   env=env)
    assert json.loads((tmp_path / "s2" / "search.json").read_text())["profiles_run"] == 0, again.stderr[-2000:]
    run = gmiexp("--config-dir", str(tmp_path / "p"), "+preset=tiny", "max_iterations=2", "launch.progress=false",
                 f"hydra.run.dir={tmp_path / 'run'}", env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    cfg = json.loads((tmp_path / "run" / "summary.json").read_text())["config"]
    assert (cfg["num_envs"], cfg["gmis_per_gpu"]) == (report["num_envs"], report["gmis_per_gpu"])


@pytest.mark.slow
def test_real_grid_profiles_every_point(tmp_path):
    env = {**os.environ, "GMIEXP_CACHE_DIR": str(tmp_path / "cache"), "GMIEXP_PRESET_DIR": str(tmp_path / "p")}
    r = gmiexp("mode=search", *TINY, "search.grid=true", f"hydra.run.dir={tmp_path / 'g'}", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((tmp_path / "g" / "search.json").read_text())["profiles"] == 6


@pytest.mark.slow
@pytest.mark.timeout(900)  # about ten short profiles: over five minutes on a loaded 2-core host
def test_real_paired_search_records_its_pairs(tmp_path):
    """The default variant end to end: shortened profiles, paired decisions in search.json, a runnable pick."""
    env = {**os.environ, "GMIEXP_CACHE_DIR": str(tmp_path / "cache"), "GMIEXP_PRESET_DIR": str(tmp_path / "p")}
    # Six points of a few iterations each: a launch would outweigh them all, so price env steps only.
    budget = ["search.budget=1.0", "search.launch_steps=0"]
    r = gmiexp("mode=search", *TINY, *budget, "search.cache=false", f"hydra.run.dir={tmp_path / 's'}", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((tmp_path / "s" / "search.json").read_text())
    assert report["method"] == "paired" and report["status"] == "ok" and report["profiles"] >= 3
    assert report["comparisons"] and all(c["decision"] in ("candidate", "incumbent", "unrunnable")
                                         for c in report["comparisons"])
    assert report["cost"]["cost_ratio_model"] <= 1.0
    assert len(list((tmp_path / "s" / "profiles").iterdir())) == report["profiles"]  # re-measures kept apart
    summary = json.loads(next((tmp_path / "s" / "profiles").glob("*/summary.json")).read_text())
    assert summary["config"]["max_iterations"] == 2  # half of 1 + 2 iterations, rounded up
