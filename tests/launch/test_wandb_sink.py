"""W&B from the launcher: an offline run's own .wandb file holds summary.json's metrics, the lead GMI's history,
the Plan as config, plan.yaml as a file, and the group/tags/name multirun members are compared by."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gmitest import compose_config, run_cli
from wandb_records import read_run

from gmiexp.launch import wandb_sink
from gmiexp.launch.live import LiveLog
from gmiexp.planner.build import build_plan
from gmiexp.status import StatusWriter


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")


def test_offline_run_holds_every_summary_key(tmp_path: Path) -> None:
    r = run_cli("task=Cartpole", "num_gpus=1", "gmis_per_gpu=2", "num_envs=32", "max_iterations=3",
                "train.minibatch_size=256", "train.mini_epochs=1", "launch.progress=false", "logger=wandb",
                "experiment=wbtest", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("\n") == 1 and r.stdout.startswith("gmiexp ok:")  # W&B prints nothing on stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    wb = read_run(tmp_path)
    expected = {k: v for k, v in summary["metrics"].items() if v is not None}
    assert set(expected) >= {"perf/env_steps_per_s", "perf/gmi/1/env_steps_per_s", "reward/mean", "time/train_s",
                             "mem/peak_rss_mb", "cpu/util"}
    assert {k: wb["summary"].get(k) for k in expected} == pytest.approx(expected)
    assert wb["summary"]["status"] == "ok" and wb["summary"]["wall_s"] == pytest.approx(summary["wall_s"])
    assert [h["reward/mean"] for h in wb["history"]] == [h["reward/mean"] for h in summary["history"]]
    assert len(wb["history"]) == 3
    assert wb["run"].run_group == "wbtest"
    assert list(wb["run"].tags) == ["layout:tcg_ex", "backend:direct", "reduction:allreduce"]
    assert {k: wb["config"][k] for k in summary["config"]} == summary["config"]
    assert wb["config"]["plan"]["layout"] == "tcg_ex" and len(wb["config"]["plan"]["gmis"]) == 2
    assert "plan.yaml" in wb["files"]


def test_lead_gmi_history_group_and_multirun_name(tmp_path: Path) -> None:
    """A layout whose GMI 0 sees no episodes (a trainer) logs the first GMI reporting rewards."""
    run_dir = tmp_path / "sweep" / "3"
    cfg = compose_config("task=Cartpole", "mode=plan", "logger=wandb", "logger.group=g1", "logger.tags=[mine]",
                         "num_gpus=1", "gmis_per_gpu=2")
    plan, _ = build_plan(cfg, run_dir)
    plan.save(run_dir / "plan.yaml")
    StatusWriter(run_dir, 0).history({"iteration": 1, "wall_s": 1.0, "frames": 10, "reward/mean": None})
    for i in (1, 2):
        StatusWriter(run_dir, 1).history({"iteration": i, "wall_s": float(i), "frames": 10 * i, "reward/mean": 5.0 * i})
    summary = {"status": "ok", "plan_id": plan.plan_id, "wall_s": 2.0, "lead_gmi": 1, "config": {"task": "Cartpole"},
               "metrics": {"perf/env_steps_per_s": 12.0, "reward/mean": 10.0, "mem/workload_mb": None}}
    LiveLog(plan, run_dir, [wandb_sink.WandbSink(plan, run_dir)]).finish(summary)  # what the launcher does, at once
    wb = read_run(run_dir)
    assert [h["reward/mean"] for h in wb["history"]] == [5.0, 10.0]
    assert wb["run"].run_group == "g1" and wb["run"].display_name == "sweep/3"
    assert list(wb["run"].tags)[-1] == "mine"
    assert wb["summary"]["perf/env_steps_per_s"] == 12.0 and "mem/workload_mb" not in wb["summary"]


def test_logger_none_writes_nothing(tmp_path: Path) -> None:
    plan, _ = build_plan(compose_config("task=Cartpole", "mode=plan"), tmp_path)
    assert not wandb_sink.enabled(plan)
    log = LiveLog.open(plan, tmp_path)
    assert not any(isinstance(s, wandb_sink.WandbSink) for s in log.sinks)
    log.finish({"status": "ok", "metrics": {}})
    assert not (tmp_path / "wandb").exists()
