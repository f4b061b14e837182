"""Report builder on fixture summaries: table, baseline normalisation, PNGs, offline W&B note."""

import csv
import json

import pytest

from gmiexp import report


def summary(gmis, num_envs, steps, rss, status="ok"):
    hist = [{"iteration": i, "wall_s": 0.5 * i, "frames": i * 1000, "reward/mean": 10.0 + i * gmis,
             "perf/env_steps_per_s": steps} for i in range(1, 6)]
    return {"status": status, "plan_id": f"p{gmis}{num_envs}", "run_dir": "", "wall_s": 3.0,
            "config": {"task": "Cartpole", "layout": "tcg_ex", "backend": "direct", "reduction": "allreduce",
                       "num_gpus": 1, "gmis_per_gpu": gmis, "num_envs": num_envs, "max_iterations": 5,
                       "seed": 1, "experiment": "fixture"},
            "metrics": {"perf/env_steps_per_s": steps, "reward/mean": 20.0, "mem/peak_rss_mb": rss},
            "history": hist}


@pytest.fixture
def multirun(tmp_path):
    root = tmp_path / "multirun"
    for i, s in enumerate([summary(1, 64, 1000.0, 300.0), summary(2, 64, 1500.0, 310.0),
                           summary(3, 64, 1200.0, 320.0), summary(2, 128, 0.0, 0.0, status="failed")]):
        (root / str(i)).mkdir(parents=True)
        (root / str(i) / "summary.json").write_text(json.dumps(s))
    (root / "10").mkdir()
    (root / "10" / "summary.json").write_text(json.dumps(summary(4, 64, 500.0, 330.0)))
    return root


def test_report_builds_table_plots_and_offline_note(multirun, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "offline")
    md = report.build(multirun, multirun / "report", {})
    text = md.read_text()
    for png in ("throughput.png", "reward.png", "memory.png"):
        assert (multirun / "report" / png).stat().st_size > 1000 and png in text
    rows = list(csv.DictReader((multirun / "report" / "runs.csv").open()))
    assert [r["label"] for r in rows] == ["gmis_per_gpu=1 num_envs=64", "gmis_per_gpu=2 num_envs=64",
                                          "gmis_per_gpu=3 num_envs=64", "gmis_per_gpu=2 num_envs=128",
                                          "gmis_per_gpu=4 num_envs=64"]  # job 10 after job 3
    assert [float(r["vs_baseline"]) for r in rows] == [1.0, 1.5, 1.2, 0.0, 0.5]
    assert "WANDB_MODE=offline" in text and "local report only" in capsys.readouterr().out


def test_baseline_selector(multirun):
    runs = report.load_runs(multirun)
    assert report.pick_baseline(runs, {"gmis_per_gpu": "3"}).config["gmis_per_gpu"] == 3
    with pytest.raises(SystemExit, match="no run matches"):
        report.pick_baseline(runs, {"gmis_per_gpu": "9"})


def test_cli_main(multirun, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert report.main([str(multirun), "--out", str(tmp_path / "r"), "--baseline", "gmis_per_gpu=2"]) == 0
    rows = list(csv.DictReader((tmp_path / "r" / "runs.csv").open()))
    assert float(rows[1]["vs_baseline"]) == 1.0


def test_online_without_key_stays_local(multirun, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    assert "local report only" in report.wandb_report(report.load_runs(multirun), "gmiexp", None, "t")


def test_empty_dir_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="no summary.json"):
        report.build(tmp_path, tmp_path / "out", {})


def test_online_report_is_built_with_wandb_workspaces(multirun, monkeypatch):
    """The W&B report is built from wandb-workspaces' real (validated) models; only save and url are faked."""
    wr = pytest.importorskip("wandb_workspaces.reports.v2")
    saved = []

    def fake_save(self, *args, **kwargs):
        self.id = "fake-id"  # the real save serialises (which needs the W&B API for runset filters) and uploads
        saved.append(self)
        return self

    monkeypatch.setattr(report, "wandb_online", lambda: (True, "online"))
    monkeypatch.setattr(wr.Report, "save", fake_save)
    monkeypatch.setattr(wr.Report, "url", property(lambda self: f"https://wandb.test/{self.entity}/{self.id}"))
    note = report.wandb_report(report.load_runs(multirun), "gmiexp", "team", "gmiexp: fixture")
    assert note == "W&B report created: https://wandb.test/team/fake-id"
    (rep,) = saved
    assert rep.project == "gmiexp" and rep.entity == "team" and rep.title == "gmiexp: fixture"
    (grid,) = rep.blocks
    assert [r.name for r in grid.runsets] == ["fixture"]
    assert grid.runsets[0].filters == "Config('experiment') = 'fixture'"
    assert [type(p).__name__ for p in grid.panels] == ["BarPlot", "LinePlot", "BarPlot"]
    assert grid.panels[0].metrics == [report.STEPS]
