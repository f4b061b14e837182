"""Short real runs of every layout on CPU (subprocess), with experience integrity and /dev/shm hygiene."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from gmitest import FAST, run_cli

from gmiexp.plan import Plan

#: Segments only the layouts' roles create (experience routes, weight boards, TDG state/action rings).
OURS = re.compile(r"^gmiexp_.+_(exp\d+to\d+|weights\d+|tdg-state\d+|tdg-action\d+)")


def our_segments(since: float) -> list[str]:
    out = []
    for p in Path("/dev/shm").glob("gmiexp_*"):
        try:
            if OURS.match(p.name) and p.stat().st_mtime >= since - 1:
                out.append(p.name)
        except FileNotFoundError:
            pass
    return out


def run_layout(tmp_path: Path, layout: str, *extra: str) -> tuple[dict, Plan]:
    run_dir = tmp_path / "run"
    t0 = time.time()
    r = run_cli(f"layout={layout}", *FAST, "max_iterations=4", *extra, f"hydra.run.dir={run_dir}", timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    plan = Plan.load(run_dir / "plan.yaml")
    assert our_segments(t0) == [], "shared-memory segments left in /dev/shm"
    return json.loads((run_dir / "summary.json").read_text()), plan


@pytest.mark.parametrize("layout", ["tcg", "tdg"])
def test_serving_layouts_report_pps(layout: str, tmp_path: Path, no_orphans: None) -> None:
    s, plan = run_layout(tmp_path, layout)
    m = s["metrics"]
    assert m["async/predictions_per_s"] > 0 and m["perf/env_steps_per_s"] > 0
    assert "async/train_samples_per_s" not in m
    preds = sum(g.get("predictions", 0) for g in s["gmis"].values())
    assert preds == 4 * 16 * 32 * len([g for g in plan.gmis if g.has("simulator")])


def check_integrity(s: dict, plan: Plan, horizon: int = 16, iters: int = 4) -> tuple[list[dict], list[dict]]:
    agents = [s["gmis"][str(g.id)] for g in plan.gmis if g.has("agent")]
    trainers = [s["gmis"][str(g.id)] for g in plan.gmis if g.has("trainer")]
    envs = plan.gmis[0].num_envs
    for a in agents:  # every record sent once, plus the bootstrap records that open each later rollout
        assert a["rows_sent"] == (horizon + (iters - 1) * (horizon - 1)) * envs
    assert sum(t["seq_errors"] for t in trainers) == 0
    assert sum(t["rows_received"] for t in trainers) == len(agents) * iters * horizon * envs
    trained_or_stale = sum(t["train_samples"] for t in trainers) + sum(t["stale_rows"] for t in trainers) * (
        horizon - 1) // horizon
    assert trained_or_stale == len(agents) * iters * (horizon - 1) * envs
    return agents, trainers


def test_tdg_ex_trains_synchronously(tmp_path: Path, no_orphans: None) -> None:
    s, plan = run_layout(tmp_path, "tdg_ex", "layout.trainers_per_gpu=1")
    agents, trainers = check_integrity(s, plan)
    assert all(a["async/max_lag_seen"] == 0 for a in agents)
    assert all(t["async/max_lag"] == 0 and t["stale_rows"] == 0 and t["updates"] == 4 for t in trainers)
    assert trainers[0]["weights_version"] == 5  # initial weights + one per update
    assert s["metrics"]["async/train_samples_per_s"] > 0


@pytest.mark.parametrize("channel", ["multi", pytest.param("uni", marks=pytest.mark.slow)])
def test_decoupled_async_moves_every_row_intact(channel: str, tmp_path: Path, no_orphans: None) -> None:
    s, plan = run_layout(tmp_path, "decoupled_async", f"channel={channel}", "async_train.max_policy_lag=2")
    _, trainers = check_integrity(s, plan)
    assert all(t["async/max_lag"] >= 0 for t in trainers)
    assert s["config"]["channel"] == channel
    m = s["metrics"]
    assert m["async/predictions_per_s"] > 0 and m["async/train_samples_per_s"] > 0
