"""The mjlab configs of Fig 7, Fig 10 and Table 8 plan their whole sweeps for an H100 host (nothing launches)."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize(("study", "jobs"), [("fig7_throughput", 12), ("fig10_num_envs", 12), ("table8_channels", 8)])
def test_mjlab_study_plans_on_hopper(study, jobs, tmp_path):
    r = subprocess.run([sys.executable, "-m", "gmiexp", "-m", "--config-dir", str(ROOT / "experiments" / study),
                        "--config-name", "mjlab", "mode=plan", "hardware=h100x8",
                        "hardware.mig=false", f"hydra.sweep.dir={tmp_path}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout  # one plan YAML per job (mode=plan launches nothing)
    assert out.count("\nlayout: ") == jobs and out.count("  simulator: mjlab\n") == jobs
    for robot in ("Go1", "G1"):
        assert out.count(f"  env_id: Mjlab-Velocity-Flat-Unitree-{robot}\n") == jobs // 2
