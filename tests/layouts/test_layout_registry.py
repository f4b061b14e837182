"""A layout is one registered class plus its YAML: this test adds one without touching src/ and runs it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from gmitest import FAST, compose_config
from hydra.core.config_store import ConfigStore

from gmiexp.app import run
from gmiexp.config import LayoutConfig
from gmiexp.layouts import LAYOUTS, Layout, LayoutKind, LayoutRequest, get
from gmiexp.plan import GMI, Plan
from gmiexp.planner import build_plan

NAME = "tcg_ex_plus"


class TCGExPlus(Layout):
    """TCG_EX plus one more holistic training GMI on the last GPU (an uneven GMI-to-GPU map)."""

    kind = LayoutKind.SYNC
    default_role = "ppo"  # an existing role: rl-games' PPO in every GMI

    def build(self, req: LayoutRequest) -> Plan:
        plan = get("tcg_ex").build(req)
        last = plan.gmis[-1]
        plan.gmis.append(GMI(id=len(plan.gmis), device=last.device, local_index=last.local_index + 1,
                             roles=list(last.roles), num_envs=req.num_envs))
        plan.trainer_group.append(plan.gmis[-1].id)
        plan.layout = req.layout.name
        return plan


@pytest.fixture
def tcg_ex_plus() -> Iterator[str]:
    """Register the layout and its config-group entry (what ``conf/layout/tcg_ex_plus.yaml`` would hold)."""
    LAYOUTS.register(NAME)(TCGExPlus)
    ConfigStore.instance().store(group="layout", name=NAME, node=LayoutConfig(name=NAME))
    yield NAME
    LAYOUTS.unregister(NAME)
    ConfigStore.instance().repo["layout"].pop(f"{NAME}.yaml", None)


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


def test_a_registered_layout_runs(tcg_ex_plus: str, tmp_path: Path, no_orphans: None) -> None:
    """Two holistic GMIs on one logical GPU train PPO and reduce gradients between them."""
    code = run(compose_config(f"layout={tcg_ex_plus}", *FAST, "hardware=cpu", "num_gpus=1", "gmis_per_gpu=1",
                              "max_iterations=2"), tmp_path)
    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    plan = Plan.load(tmp_path / "plan.yaml")
    assert summary["status"] == "ok" and plan.layout == NAME and plan.world_size == 2
    assert summary["config"]["layout"] == NAME
    assert summary["metrics"]["perf/env_steps_per_s"] > 0
