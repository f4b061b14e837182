"""An Isaac Gym task imports isaacgym before torch in the GMI (Isaac Gym refuses to load after torch)."""

from __future__ import annotations

import os
from pathlib import Path

from gmitest import FAST, run_cli

FAKE_ISAAC = str(Path(__file__).resolve().parents[1] / "fakes" / "isaac")


def test_isaac_task_gmi_imports_isaacgym_before_torch(tmp_path, monkeypatch, no_orphans):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([FAKE_ISAAC, os.environ.get("PYTHONPATH", "")]))
    r = run_cli(*FAST, "task=IsaacAnt", "num_gpus=1", "gmis_per_gpu=1", "max_iterations=1",
                f"hydra.run.dir={tmp_path}")
    assert r.returncode == 1, r.stderr[-2000:]  # the fake simulator stops the run once it is reached
    assert "PyTorch was imported before isaacgym" not in r.stderr, r.stderr[-2000:]
    assert "fake isaacgymenvs.make reached (task=Ant)" in r.stderr, r.stderr[-2000:]
