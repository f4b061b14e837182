"""Short real runs of every layout on CPU (subprocess), with experience integrity and /dev/shm hygiene."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from gmitest import FAST, popen_cli

from gmiexp.plan import Plan
from gmiexp.shm.names import LAUNCHER_TAG_RE
from gmiexp.status import read_history

#: Segments only the layouts' roles create (experience routes, weight boards, TDG state/action rings, replay stores).
OURS = re.compile(r"^gmiexp_.+_(exp\d+to\d+|weights\d+|tdg-state\d+|tdg-action\d+|replay\d+)")


def our_segments(launcher_pid: int) -> list[str]:
    """The layouts' segments of the run whose launcher had ``launcher_pid`` (its run tag names it), so runs of
    other tests beside this one (pytest-xdist) do not count."""
    out = []
    for p in Path("/dev/shm").glob(f"gmiexp_{launcher_pid}-*"):
        m = LAUNCHER_TAG_RE.match(p.name)
        if m and int(m.group(1)) == launcher_pid and OURS.match(p.name):
            out.append(p.name)
    return out


def run_layout(tmp_path: Path, layout: str, *extra: str, iters: int = 4) -> tuple[dict, Plan]:
    run_dir = tmp_path / "run"
    p = popen_cli(f"layout={layout}", *FAST, f"max_iterations={iters}", *extra, f"hydra.run.dir={run_dir}")
    try:
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err[-3000:]
    plan = Plan.load(run_dir / "plan.yaml")
    assert our_segments(p.pid) == [], "shared-memory segments left in /dev/shm"
    return json.loads((run_dir / "summary.json").read_text()), plan


@pytest.mark.parametrize("layout", ["tcg", pytest.param("tdg", marks=pytest.mark.slow)])  # tdg: test_lazy_device
def test_serving_layouts_report_pps(layout: str, tmp_path: Path, no_orphans: None) -> None:
    # on the lazy stand-in device: this run is also the default suite's tcg run on lazy (test_lazy_device's
    # tcg-cartpole is slow); tcg on the CPU runs by default in tests/test_first_run.py
    s, plan = run_layout(tmp_path, layout, "train.device=lazy")
    assert plan.train.device == "lazy"
    m = s["metrics"]
    assert m["async/predictions_per_s"] > 0 and m["perf/env_steps_per_s"] > 0
    assert "async/train_samples_per_s" not in m
    preds = sum(g.get("predictions", 0) for g in s["gmis"].values())
    assert preds == 4 * 16 * 32 * len([g for g in plan.gmis if g.has("simulator")])


def check_integrity(s: dict, plan: Plan, horizon: int = 16, iters: int = 4) -> tuple[list[dict], list[dict]]:
    agents = [s["gmis"][str(g.id)] for g in plan.gmis if g.has("agent")]
    trainers = [s["gmis"][str(g.id)] for g in plan.gmis if g.has("trainer")]
    envs = plan.gmis[0].num_envs
    for a in agents:  # every step once: rl-games' horizon_length steps per rollout
        assert a["rows_sent"] == iters * horizon * envs
    assert sum(t["seq_errors"] for t in trainers) == 0  # each rollout also carries its bootstrap record
    assert sum(t["rows_received"] for t in trainers) == len(agents) * iters * (horizon + 1) * envs
    trained_or_stale = sum(t["train_samples"] for t in trainers) + sum(t["stale_rows"] for t in trainers) * (
        horizon) // (horizon + 1)
    assert trained_or_stale == len(agents) * iters * horizon * envs
    # the checkpoint's epoch counts the agents' iterations, not updates (stale rollouts, several agents per trainer)
    assert {t["epoch"] for t in trainers} == {iters}
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
    # the paper's A3C (A2C's one step per rollout): the layout's default is PPO, trained by the next test
    s, plan = run_layout(tmp_path, "decoupled_async", f"channel={channel}", "async_train.max_policy_lag=2",
                         "async_train.algo=a2c")
    assert plan.async_train.algo == "a2c"
    _, trainers = check_integrity(s, plan)
    assert all(t["async/max_lag"] >= 0 for t in trainers)
    assert s["config"]["channel"] == channel
    m = s["metrics"]
    assert m["async/predictions_per_s"] > 0 and m["async/train_samples_per_s"] > 0


def test_decoupled_async_trains_ppo_by_default(tmp_path: Path, no_orphans: None) -> None:
    s, plan = run_layout(tmp_path, "decoupled_async", "async_train.max_policy_lag=100")
    assert plan.async_train.algo == "ppo"  # what rl-games' files train (their ppo: True)
    _, trainers = check_integrity(s, plan)
    assert all(t["train_samples"] == 2 * 4 * 16 * 32 and t["updates"] > 0 for t in trainers)  # nothing stale
    assert s["metrics"]["async/train_samples_per_s"] > 0
    assert all("replay/batches" not in t for t in trainers)  # replay off: no store


def rollouts_by_agent(trainers: list[dict]) -> dict[str, list[int]]:
    """Every trainer's rollout spans, merged per agent (a rollout received twice appears twice)."""
    out: dict[str, list[int]] = {}
    for t in trainers:
        for a, runs in t["rollouts"].items():
            out.setdefault(a, []).extend(i for lo, hi in runs for i in range(lo, hi + 1))
    return out


def test_decoupled_async_spreads_rollouts_over_several_trainers(tmp_path: Path, no_orphans: None) -> None:
    # the agents' Migrators send 4 rollouts to a route before picking the least-loaded one again
    iters = 8
    s, plan = run_layout(tmp_path, "decoupled_async", "layout.trainers_per_gpu=2", "async_train.max_policy_lag=100",
                         iters=iters)
    assert len(plan.trainer_group) == 2
    agents, trainers = check_integrity(s, plan, iters=iters)
    assert all(t["train_samples"] > 0 and t["seq_errors"] == 0 for t in trainers)  # every trainer trained
    assert len({t["updates"] for t in trainers}) == 1  # collective updates: the same count everywhere
    assert sum(t["train_samples"] for t in trainers) == len(agents) * iters * 16 * 32
    merged = rollouts_by_agent(trainers)
    assert sorted(merged) == [str(g.id) for g in plan.gmis if g.has("agent")]
    assert all(sorted(ids) == list(range(iters)) for ids in merged.values())  # none lost, none twice
    # the return is every agent's last episodes (each agent's own window stays under gmi/<id>/)
    m = s["metrics"]
    assert {k for k in m if k.startswith("gmi/") and k.endswith("/reward/mean")} == \
        {f"gmi/{a}/reward/mean" for a in merged}
    assert m["reward/mean"] == s["history"][-1]["reward/mean"] > 0


@pytest.mark.parametrize(("layout", "extra"), [
    pytest.param("decoupled_async", ["async_train.replay_selection=prioritized", "channel.store_capacity=2048"],
                 marks=pytest.mark.slow),
    ("tdg_ex", ["layout.trainers_per_gpu=1", "async_train.replay_selection=uniform",
                "async_train.replay_eviction=lifo"]),
])
def test_replay_trains_on_stored_rollouts(layout: str, extra: list[str], tmp_path: Path, no_orphans: None) -> None:
    iters = 6
    s, plan = run_layout(tmp_path, layout, "async_train.replay_ratio=2", "async_train.max_policy_lag=100", *extra,
                         iters=iters)
    _, trainers = check_integrity(s, plan, iters=iters)  # fresh rows still arrive and train exactly once
    for t in trainers:
        assert t["replay/batches"] > 0 and t["replay/rows"] >= t["replay/batches"] * 16 * 32
        assert 0 < t["replay/stored"] <= t["replay/capacity"] and t["replay/added"] == 2 * iters
    if layout == "decoupled_async":  # 2048 records hold 3 rollouts of 17 x 32 (16 steps, 1 bootstrap): FIFO evicted
        assert trainers[0]["replay/capacity"] == 3 and trainers[0]["replay/stored"] == 3
    rows = read_history(Path(s["run_dir"]), plan.trainer_group[0])
    assert sum(r["replay/batches"] for r in rows) == trainers[0]["replay/batches"]


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_tdg_ex_survives_a_trainer_slower_than_its_agents(tmp_path: Path, no_orphans: None) -> None:
    # agents send the next rollout before the trainer takes again: it must still be delivered
    s, plan = run_layout(tmp_path, "tdg_ex", "layout.trainers_per_gpu=1", "role=experience_roles:SlowTrainerTDGEX",
                         "async_train.drain_timeout_s=10", iters=3)
    _, trainers = check_integrity(s, plan, iters=3)
    assert trainers[0]["updates"] == 3
