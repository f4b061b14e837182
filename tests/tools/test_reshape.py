"""``python -m gmiexp.tools.reshape`` reads the run's partition from plan.yaml as a typed GlobalBatch.

The requests it writes and the runs that take them: tests/launch/test_elastic.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from gmitest import compose_config

from gmiexp.launch.elastic import REQUEST_FILE
from gmiexp.launch.ownership import own_run_dir
from gmiexp.plan import Plan
from gmiexp.plan.model import GlobalBatch
from gmiexp.planner.build import build_plan
from gmiexp.tools import reshape as tool


def saved(run_dir: Path, *overrides: str, **batch: object) -> Plan:
    """A re-shaping run's plan.yaml, its global batch changed by ``batch`` (what the tool must read from the file)."""
    plan, _ = build_plan(compose_config("task=Cartpole", "launch.reshape=request", *overrides), run_dir)
    assert isinstance(plan.global_batch, GlobalBatch)
    plan.global_batch = dataclasses.replace(plan.global_batch, **batch)
    plan.save(run_dir / "plan.yaml")
    return plan


def test_the_tool_reads_the_reachable_partitions_from_plan_yaml(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    run_dir = tmp_path / "run"
    saved(run_dir, "gmis_per_gpu=2", "batch.total_envs=16", reachable=[2, 8], envs_per_gmi=[8, 2])
    assert isinstance(Plan.load(run_dir / "plan.yaml").global_batch, GlobalBatch)
    with own_run_dir(run_dir):
        assert tool.main([str(run_dir), "gmis_per_gpu=4", "--no-wait"]) == 2
        assert ("gmis_per_gpu=4 cannot share the run's global batch (16 environments, minibatch "
                in capsys.readouterr().err)
        assert tool.main([str(run_dir), "gmis_per_gpu=8", "--no-wait"]) == 0
    req = json.loads((run_dir / REQUEST_FILE).read_text())
    assert (req["gmis_per_gpu"], req["overrides"]) == (8, {})


def test_a_split_request_names_the_run_s_gmis_per_gpu_from_plan_yaml(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    run_dir = tmp_path / "run"
    saved(run_dir, "layout=tdg_ex", "gmis_per_gpu=2", "batch.total_envs=16", trainers_per_gpu=2, trainer_splits=[1, 2])
    with own_run_dir(run_dir):
        assert tool.main([str(run_dir), "trainers_per_gpu=2", "--no-wait"]) == 2
        assert "the run already has trainers_per_gpu=2" in capsys.readouterr().err
        assert tool.main([str(run_dir), "trainers_per_gpu=1", "--no-wait"]) == 0
    req = json.loads((run_dir / REQUEST_FILE).read_text())
    assert (req["gmis_per_gpu"], req["overrides"]) == (2, {"layout.trainers_per_gpu": 1})


def test_a_plan_without_a_global_batch_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run_dir = tmp_path / "run"
    plan, _ = build_plan(compose_config("task=Cartpole", "launch.reshape=request"), run_dir)
    plan.global_batch = None
    plan.save(run_dir / "plan.yaml")
    with own_run_dir(run_dir):
        assert tool.main([str(run_dir), "gmis_per_gpu=2", "--no-wait"]) == 2
    assert "has no global batch to keep" in capsys.readouterr().err
