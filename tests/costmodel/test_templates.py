"""The paper's layout cost model (Tables 3-5): hand-worked values, and a plan's terms from the task's real sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config

from gmiexp.costmodel.templates import CostTerms, compare, dominant_resource, terms_for
from gmiexp.envs import task_spaces
from gmiexp.hardware import preset
from gmiexp.layouts import LayoutKind, get, paper_families
from gmiexp.layouts.layout import LayoutRequest
from gmiexp.planner.build import build_plan
from gmiexp.rl.rlgames.params import policy_param_count

TASKS = sorted(p.stem for p in (Path(__file__).parents[2] / "conf" / "task").glob("*.yaml"))


def test_cost_model_reproduces_the_papers_estimates() -> None:
    t = CostTerms()
    serving, training = (compare(f, t) for f in paper_families(LayoutKind.ASYNC))
    # Table 4 by hand: R_tdg = (6*50 + 1*0.2*5)/7 = 43.0; TOP_tcg = (100/50)/7; TOP_tdg = (100/43)/(7 + 2*7)
    assert serving["tdg"]["resource"] == pytest.approx(301 / 7)
    assert serving["tcg"]["throughput"] == pytest.approx(2 / 7)
    assert serving["tdg"]["throughput"] == pytest.approx(100 / (301 / 7) / 21)
    assert serving["resource_penalty_colocated"] == pytest.approx(50 / (301 / 7) - 1)  # paper: ~0.16
    assert 2.3 < serving["speedup_colocated"] < 2.8  # paper: about 2.5x
    assert training["tdg_ex"]["comm_over_bw"] == pytest.approx(7 * 9)
    assert 0.4 < training["resource_penalty_colocated"] < 0.6  # paper: ~0.5
    assert 4.5 < training["speedup_colocated"] < 6.0  # paper: about 5x
    assert training["tcg_ex"]["comm_bytes"] == pytest.approx(2 * (t.n - 1) * t.M_p / t.n)
    assert dominant_resource(60, 100, 10, 80) == "SM" and dominant_resource(10, 100, 40, 80) == "Memory"


@pytest.mark.parametrize("task", TASKS)
def test_cost_terms_use_the_simulators_sizes(task: str) -> None:
    """One source of task sizes: the cost model's S, A and M_p follow gmiexp.envs.task_spaces (a uint8 frame's
    pixel is one byte) and the policy
    rl-games builds (they once disagreed: Cartpole (4, 2) vs (4, 1), Isaac tasks vs a (64, 8) fallback)."""
    cfg = compose_config(f"task={task}", "num_envs=8")
    plan = get("tcg_ex").build(LayoutRequest(layout=cfg.layout, hardware=preset("cpu"), num_gpus=1,
                                             gmis_per_gpu=2, num_envs=8))
    plan.task, plan.train = cfg.task, cfg.train
    terms = terms_for(plan, policy_param_count(plan))
    sp = task_spaces(plan.task)
    assert (terms.S, terms.A, terms.W) == (sp.obs_bytes * 8.0, 4.0 * sp.actions_num * 8, 4.0 * 8)
    assert terms.M_p == 4.0 * policy_param_count(plan)
    assert (terms.n, terms.m) == (2, cfg.train.horizon_length)


def test_plan_notes_hold_the_plans_terms(tmp_path: Path) -> None:
    plan, _ = build_plan(compose_config("task=Cartpole", "hardware=cpu", "num_envs=8"), tmp_path)
    assert CostTerms(**plan.notes["cost_model"]["terms"]) == terms_for(plan, policy_param_count(plan))
