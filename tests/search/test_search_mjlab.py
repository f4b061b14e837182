"""mode=search profiles an mjlab task through the CLI (MuJoCo Warp on CPU, two tiny points; slow suite)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_search_profiles_mjlab_cartpole(tmp_path):
    env = {**os.environ, "GMIEXP_CACHE_DIR": str(tmp_path / "cache"), "GMIEXP_PRESET_DIR": str(tmp_path / "p")}
    args = ["mode=search", "task=MjlabCartpole", "search.variant=paper", "search.max_gmis_per_gpu=1",
            "search.num_envs=[16,32]",
            "search.warmup_iterations=1", "search.profile_iterations=2", "search.min_profile_steps=0",
            "search.timeout_s=400", f"hydra.run.dir={tmp_path / 's'}"]
    r = subprocess.run([sys.executable, "-m", "gmiexp", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=1100)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((tmp_path / "s" / "search.json").read_text())
    assert report["status"] == "ok" and report["profiles"] == 2
    assert report["num_envs"] in (16, 32) and report["gmis_per_gpu"] == 1
