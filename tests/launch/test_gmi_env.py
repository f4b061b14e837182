"""A GMI's environment: applied in its own process; in the launcher's process (an in-process run) only for the run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gmitest import FAST, compose_config

from gmiexp.app import run
from gmiexp.launch.gmi_env import gmi_environment
from gmiexp.plan import GMI, Plan


def test_an_in_process_gmi_s_environment_and_cores_last_as_long_as_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    cores = os.sched_getaffinity(0)
    gmi = GMI(id=0, device=0, roles=["simulator"], cpus=[min(cores)],
              env={"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"})
    with gmi_environment(gmi):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "" and os.environ["OMP_NUM_THREADS"] == "1"
        assert os.sched_getaffinity(0) == {min(cores)}
    assert "CUDA_VISIBLE_DEVICES" not in os.environ and os.environ["OMP_NUM_THREADS"] == "7"
    assert os.sched_getaffinity(0) == cores


def test_an_in_process_run_leaves_the_process_environment_as_it_found_it(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: its GMI's CUDA_VISIBLE_DEVICES ('' on CPU, one GPU's UUID on a GPU) stayed, and bounded the GPUs of
    every later run in the process and of every process it started (a notebook's second run saw one GPU or none)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert run(compose_config(*FAST, "num_gpus=1", "gmis_per_gpu=1", "max_iterations=1", "launch.inprocess=true"),
               tmp_path) == 0
    gmi_env = Plan.load(tmp_path / "plan.yaml").gmis[0].env  # what the run set while it ran
    assert gmi_env["CUDA_VISIBLE_DEVICES"] == "" and gmi_env["OMP_NUM_THREADS"] != "7"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ and os.environ["OMP_NUM_THREADS"] == "7"
