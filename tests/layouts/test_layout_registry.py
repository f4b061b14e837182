"""A layout is one registered class plus its YAML: this test adds one without touching src/ and runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import extra_layouts
import pytest
from extra_layouts import NAME
from gmitest import FAST, cli_env, compose_config

from gmiexp.app import run
from gmiexp.layouts import LAYOUTS, get
from gmiexp.plan import Plan
from gmiexp.planner.build import build_plan


@pytest.fixture
def tcg_ex_plus() -> Iterator[str]:
    """The layout registered for this test only (other tests iterate the registry)."""
    extra_layouts.register()
    yield NAME
    extra_layouts.unregister()


def test_a_registered_layout_is_planned_like_the_built_ins(tcg_ex_plus: str, tmp_path: Path) -> None:
    plan, _ = build_plan(compose_config("mode=plan", f"layout={tcg_ex_plus}", "hardware=dgx_a100",
                                        "hardware.mig=false", "backend=auto", "num_gpus=2", "gmis_per_gpu=1",
                                        "task=Ant"), tmp_path)
    assert plan.layout == NAME and plan.role == "ppo"
    assert plan.gpu_map(plan.trainer_group) == [[0], [1, 2]]
    assert plan.backend == "mps" and "trains" in plan.backend_reason  # auto reads the layout's kind
    assert plan.reduction in ("har", "mpr", "allreduce")  # Algorithm 1 over the uneven map (MRR needs even)
    assert "training (Table 5, eq. 3)" in plan.notes["cost_model"]  # the kind's table
    assert plan.channel is None  # not an experience layout: no channel settings


def test_an_unregistered_layout_exits_2_naming_the_registered_ones(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert NAME not in LAYOUTS
    with pytest.raises(Exception, match="invalid layout: 'tcg_ex_plus'; valid: .*tcg_ex"):
        get(NAME)
    code = run(compose_config("task=Cartpole", "layout.name=tcg_ex_plus"), tmp_path)
    assert code == 2
    assert "invalid layout.name: 'tcg_ex_plus'; valid: " in capsys.readouterr().err


def test_a_registered_layout_runs(tmp_path: Path, no_orphans: None) -> None:
    """Two holistic GMIs on one logical GPU train PPO and reduce gradients between them.

    In a child process, as a user's plugin module would run it: an in-process launch would leave
    torch elastic's signal handlers in the test process.
    """
    args = [f"layout={NAME}", *FAST, "hardware=cpu", "num_gpus=1", "gmis_per_gpu=1", "max_iterations=2",
            f"hydra.run.dir={tmp_path}"]
    r = subprocess.run([sys.executable, "-c", f"import extra_layouts; extra_layouts.main({args!r})"],
                       capture_output=True, text=True, timeout=120, env=cli_env())
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    plan = Plan.load(tmp_path / "plan.yaml")
    assert summary["status"] == "ok" and plan.layout == NAME and plan.world_size == 2
    assert summary["config"]["layout"] == NAME and plan.gpu_map(plan.trainer_group) == [[0, 1]]
    assert summary["metrics"]["perf/env_steps_per_s"] > 0
