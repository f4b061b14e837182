"""A population's views from its state file: curves along the lineage, the lineage, TensorBoard's pbt/*, the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gmiexp.pbt import views
from gmiexp.tools import report

LR = "train.learning_rate"


def write_state(run_dir: Path, evs: list[dict[str, Any]]) -> None:
    (run_dir / "pbt").mkdir(parents=True, exist_ok=True)
    (run_dir / views.STATE_FILE).write_text("".join(json.dumps(e) + "\n" for e in evs) + '{"event": "rec')


def population(run_dir: Path) -> list[dict[str, Any]]:
    """Two members, one interval an epoch of 100 frames; member 1 trains to 300, then copies member 0 at 100."""
    start = [{"event": "start", "member": m, "life": 0, "values": {LR: lr}, "frames": 0, "checkpoint": None}
             for m, lr in ((0, 1e-3), (1, 1e-2))]
    rec = [{"event": "record", "member": m, "life": 0, "interval": i, "frames": 100 * i, "objective": obj}
           for m, i, obj in ((0, 1, 5.0), (1, 1, 1.0), (1, 2, 1.5), (1, 3, 2.0), (0, 2, 7.0))]
    evs = [{"event": "population", "population": 2, "rule": "default", "exploit": "restart",
            "epochs_per_interval": 1}, *start, *rec,
           {"event": "decision", "member": 1, "interval": 1, "frames": 100, "source": 0, "source_interval": 1,
            "source_frames": 100, "reason": "underperformer", "values_before": {LR: 1e-2}, "values": {LR: 1.5e-3}},
           {"event": "start", "member": 1, "life": 1, "values": {LR: 1.5e-3}, "frames": 100, "checkpoint": "x.pth"},
           {"event": "record", "member": 1, "life": 1, "interval": 2, "frames": 200, "objective": 6.0},
           {"event": "finished", "best": {"member": 0, "checkpoint": "best.pth"}}]
    write_state(run_dir, evs)
    return evs


def test_a_member_s_curve_follows_its_lineage_and_drops_what_a_restart_threw_away(tmp_path: Path) -> None:
    population(tmp_path)
    evs = views.events(tmp_path)  # the line a kill cut short is skipped
    cur = views.curves(evs)
    assert [(p["frames"], p["objective"]) for p in cur[0]] == [(100, 5.0), (200, 7.0)]
    # member 1: its own 1.0 at 100, the copy's 5.0 there (a jump), then its new life: 1.5 and 2.0 are gone
    assert [(p["frames"], p["objective"], p["life"]) for p in cur[1]] == [(100, 1.0, 0), (100, 5.0, 1), (200, 6.0, 1)]
    assert [p["copied"] for p in cur[1]] == [None, 0, None]
    [row] = views.lineage(evs)
    assert (row["member"], row["source"], row["objective"], row["source_objective"]) == (1, 0, 1.0, 5.0)
    assert row["changed"] == {LR: (1e-2, 1.5e-3)}
    assert views.best_by_interval(evs) == {1: 5.0, 2: 7.0}


def test_an_in_place_exploit_is_a_jump_in_the_same_life_once_the_member_took_it(tmp_path: Path) -> None:
    start = [{"event": "start", "member": m, "life": 0, "values": {LR: lr}, "frames": 0, "checkpoint": None}
             for m, lr in ((0, 1e-3), (1, 1e-2))]
    rec = [{"event": "record", "member": m, "life": 0, "interval": i, "frames": 100 * i, "objective": obj}
           for m, i, obj in ((0, 1, 5.0), (1, 1, 1.0), (0, 2, 7.0), (1, 2, 6.5), (0, 3, 8.0), (1, 3, 9.0))]
    decision = {"event": "decision", "member": 1, "interval": 1, "frames": 100, "source": 0, "source_interval": 1,
                "source_frames": 100, "values_before": {LR: 1e-2}, "values": {LR: 2e-3}, "exploit": "inplace",
                "id": 3}
    refused = {**decision, "member": 0, "id": 4}  # decided, never taken: no row
    took = {"event": "exploited", "member": 1, "life": 0, "id": 3, "source": 0, "values": {LR: 2e-3}, "epoch": 2,
            "frames": 200, "seconds": 0.4}
    evs = [*start, *rec[:2], decision, refused, *rec[2:4], took, *rec[4:]]
    write_state(tmp_path, evs)
    [row] = views.lineage(views.events(tmp_path))
    assert row["in_place"] and row["at_frames"] == 200 and row["changed"] == {LR: (1e-2, 2e-3)}
    cur = views.curves(views.events(tmp_path))[1]
    assert [(p["frames"], p["objective"], p["life"], p["copied"], p["values"][LR]) for p in cur] == [
        (100, 1.0, 0, None, 1e-2), (200, 6.5, 0, None, 1e-2), (200, 5.0, 0, 0, 2e-3), (300, 9.0, 0, None, 2e-3)]
    assert views.members_table(tmp_path, views.events(tmp_path))[1]["values"] == {LR: 2e-3}


def test_tensorboard_has_isaac_lab_s_pbt_keys_per_member(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    population(tmp_path)
    root = views.write_tensorboard(tmp_path)
    acc = EventAccumulator(str(root / "1"))
    acc.Reload()
    assert {"pbt/objective", views.BEST_OBJECTIVE, f"pbt/{LR}"} <= set(acc.Tags()["scalars"])
    assert [(e.step, e.value) for e in acc.Scalars(f"pbt/{LR}")] == [(100, pytest.approx(1e-2)),
                                                                      (100, pytest.approx(1.5e-3)),
                                                                      (200, pytest.approx(1.5e-3))]
    assert [(e.step, e.value) for e in acc.Scalars(views.BEST_OBJECTIVE)] == [(100, 5.0), (100, 5.0), (200, 7.0)]


def test_the_report_shows_the_population_and_not_its_summary_as_a_run(tmp_path: Path) -> None:
    population(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps({"status": "ok", "members": [], "exploits": 1}))
    life = tmp_path / "members" / "0" / "life0"
    life.mkdir(parents=True)
    (life / "summary.json").write_text(json.dumps({"status": "ok", "config": {"task": "Cartpole", "seed": 1},
                                                   "metrics": {"reward/mean": 7.0, "perf/env_steps_per_s": 9.0}}))
    path = report.build(tmp_path, tmp_path / "report", {}, use_wandb=False)
    text = path.read_text()
    assert "1 runs in 1 groups" in text  # the population's own summary.json is not a run
    assert "## Population" in text and "### Lineage: 1 exploits" in text
    assert "| 1 | 1 | 100 | member 0 | 100 | restart | learning_rate 0.01 -> 0.0015 |" in text
    assert (tmp_path / "report" / "pbt.png").is_file()


def test_w_and_b_holds_the_population_s_lineage_and_members(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wandb_records import read_run

    monkeypatch.setenv("WANDB_MODE", "offline")
    population(tmp_path)
    group = views.wandb_group(None, tmp_path)
    views.log_wandb(tmp_path, "gmiexp", None, "offline", group)
    wb = read_run(tmp_path / "pbt")
    assert wb["run"].run_group == f"pbt-{tmp_path.name}" and wb["run"].job_type == "pbt"
    assert [(h["frames"], h["member/1"]) for h in wb["history"] if "member/1" in h] == [(100, 1.0), (100, 5.0),
                                                                                       (200, 6.0)]
    assert wb["summary"]["exploits"] == 1 and wb["summary"]["best_objective"] == 7.0
    assert any("lineage" in f for f in wb["files"]) and any("members" in f for f in wb["files"])


def test_a_stop_a_resume_and_a_failed_member_show_in_the_curves_and_the_report(tmp_path: Path) -> None:
    """A resumed life goes on from its own checkpoint (no jump); a failed member replaced by a leader's copy is a
    lineage row; the report lists the stop, the resume and the failure."""
    start = [{"event": "start", "member": m, "life": 0, "values": {LR: lr}, "frames": 0, "checkpoint": None,
              "cause": "new", "copy": False} for m, lr in ((0, 1e-3), (1, 1e-2))]
    rec = [{"event": "record", "member": m, "life": life, "interval": i, "frames": 100 * i, "objective": obj}
           for m, life, i, obj in ((0, 0, 1, 5.0), (1, 0, 1, 1.0), (0, 1, 2, 7.0), (1, 2, 2, 6.0))]
    evs = [{"event": "population", "population": 2, "rule": "default", "exploit": "restart",
            "epochs_per_interval": 1}, *start, *rec[:2], {"event": "stopped", "reason": "interrupted"},
           {"event": "resumed", "segment": 2, "frames": {"0": 100, "1": 100}},
           *({"event": "start", "member": m, "life": 1, "values": {LR: lr}, "frames": 100, "checkpoint": f"{m}.pth",
              "cause": "resume", "copy": False} for m, lr in ((0, 1e-3), (1, 1e-2))),
           {"event": "failed", "member": 1, "life": 1, "code": -9, "run_dir": "/r/members/1/life1",
            "then": "replaced by member 0's checkpoint 0.pth"},
           {"event": "decision", "member": 1, "interval": 1, "frames": 100, "source": 0, "source_interval": 1,
            "source_frames": 100, "reason": "failed", "values_before": {LR: 1e-2}, "values": {LR: 2e-3},
            "exploit": "restart", "checkpoint": "0.pth"},
           {"event": "start", "member": 1, "life": 2, "values": {LR: 2e-3}, "frames": 100, "checkpoint": "0.pth",
            "cause": "failed", "copy": True}, *rec[2:], {"event": "finished"}]
    write_state(tmp_path, evs)
    cur = views.curves(views.events(tmp_path))
    assert [(p["frames"], p["life"], p["copied"]) for p in cur[0]] == [(100, 0, None), (200, 1, None)]
    assert [(p["frames"], p["life"], p["copied"]) for p in cur[1]] == [(100, 0, None), (100, 2, 0), (200, 2, None)]
    [row] = views.lineage(views.events(tmp_path))
    assert (row["member"], row["source"], row["reason"]) == (1, 0, "failed")
    text = views.markdown(tmp_path, tmp_path)
    assert "| 1 | 1 | 100 | member 0 | 100 | replaced (it failed) | learning_rate 0.01 -> 0.002 |" in text
    assert "### Stops, resumes and failures: 3" in text
    assert "* resumed (segment 2): member 0 from 100 frames, member 1 from 100 frames" in text
    assert "* member 1 life 1 failed (exit -9): /r/members/1/life1; replaced by member 0's checkpoint 0.pth" in text
