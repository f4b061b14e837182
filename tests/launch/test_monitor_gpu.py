"""On a real GPU: the summary holds each GMI's own NVML peak memory, for the plan's GPU only."""

from __future__ import annotations

import json

import pytest
from gmitest import FAST, run_cli

from gmiexp.hardware import discover

pytestmark = pytest.mark.gpu


def test_two_gmis_report_their_own_peak_device_memory(tmp_path):
    hw = discover()
    if not hw.has_gpu:
        pytest.skip(f"needs an NVIDIA GPU ({hw.describe()})")
    mig = hw.gpus[0].mig_mode
    backend = ["backend=mig", "backend.mps_in_mig=true"] if mig else ["backend=direct"]
    r = run_cli(*FAST, "num_gpus=1", "gmis_per_gpu=2", "max_iterations=5", "launch.monitor_interval_s=0.2",
                *backend, f"hydra.run.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    metrics = json.loads((tmp_path / "summary.json").read_text())["metrics"]
    assert metrics["gmi/0/peak_mem_mb"] > 0 and metrics["gmi/1/peak_mem_mb"] > 0
    assert not [k for k in metrics if k.startswith("gpu/") and not k.startswith("gpu/0/")]
