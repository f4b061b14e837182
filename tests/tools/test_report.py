"""Report builder on fixture summaries: table, baseline normalisation, PNGs, offline W&B note."""

import csv
import json

import pytest

from gmiexp.tools import report


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


def test_wandb_group_offline_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    with pytest.raises(SystemExit, match="needs it online"):
        report.main(["--wandb-group", "g", "--out", str(tmp_path)])


def test_empty_dir_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="no summary.json"):
        report.build(tmp_path, tmp_path / "out", {})


class FakeWandbServer:
    """The W&B backend seen by wandb-workspaces: its GraphQL calls and the API object; everything else is real."""

    def __init__(self, runs=()):
        self.calls, self.created, self._runs = [], [], list(runs)
        self.client = type("Client", (), {"app_url": "https://wandb.test"})()

    def projects(self, entity):
        return []

    def create_project(self, project, entity):
        self.created.append((entity, project))

    def runs(self, path, filters=None, order=None):
        self.calls.append(("runs", path, filters))
        return [r for r in self._runs if r.group == filters["group"]]

    def graphql(self, api, query, variables):
        from wandb_workspaces.reports.v2 import gql

        self.calls.append((query, variables))
        if query is gql.projectInternalId:
            return {"project": {"internalId": "UHJvamVjdDox"}}
        if query is gql.upsert_view:
            return {"upsertView": {"view": {
                "id": "fake-id", "name": variables["name"], "displayName": variables["displayName"],
                "description": variables["description"], "spec": variables["spec"],
                "project": {"entityName": variables["entityName"], "name": variables["projectName"]}}}}
        raise AssertionError(f"unexpected W&B call: {query}")

    def saved_spec(self):
        from wandb_workspaces.reports.v2 import gql

        (spec,) = [json.loads(v["spec"]) for q, *rest in self.calls if q is gql.upsert_view for v in rest]
        return spec


@pytest.fixture
def wandb_server(monkeypatch):
    iface = pytest.importorskip("wandb_workspaces.reports.v2.interface")
    server = FakeWandbServer()
    monkeypatch.setattr(iface, "_get_api", lambda: server)
    monkeypatch.setattr(iface, "execute_graphql", server.graphql)
    monkeypatch.setattr(report, "wandb_online", lambda: (True, "online"))
    return server


def panel_metrics(spec):
    """Metrics of every bar-chart panel in a saved report spec, and the view types of all panels."""
    (grid,) = [b for b in spec["blocks"] if b.get("type") == "panel-grid"]
    panels = grid["metadata"]["panelBankSectionConfig"]["panels"]
    return [p["config"].get("metrics") for p in panels if p["viewType"] == "Bar Chart"], \
        [p["viewType"] for p in panels], grid["metadata"]["runSets"]


def test_online_report_puts_summary_metrics_side_by_side(multirun, wandb_server):
    """Saved through wandb-workspaces' real models and serialisation; only its network calls are faked."""
    note = report.wandb_report(report.load_runs(multirun), "gmiexp", "team", "gmiexp: fixture")
    assert note == "W&B report created: https://wandb.test/team/gmiexp/reports/gmiexp:-fixture--fake-id"
    bars, kinds, runsets = panel_metrics(wandb_server.saved_spec())
    assert bars == [["perf/env_steps_per_s"], ["reward/mean"], ["mem/peak_rss_mb"]]
    assert "Run Comparer" in kinds and "Run History Line Plot" in kinds
    assert [r["name"] for r in runsets] == ["fixture"]


class FakeRun:
    def __init__(self, name, group, summary):
        self.name, self.group, self.state, self.url = name, group, "finished", f"https://wandb.test/r/{name}"
        self.config = {**summary["config"], "plan": {}}
        self.summary_metrics = {**summary["metrics"], "status": summary["status"], "wall_s": summary["wall_s"],
                                "_step": 4, "_runtime": 3.0}
        self._history = summary["history"]

    def scan_history(self, keys):
        return [{k: h.get(k) for k in keys} for h in self._history]


def test_report_from_a_wandb_group(multirun, wandb_server, tmp_path):
    """--wandb-group reads the runs the launcher logged (summary.json's names) and compares them like local ones."""
    local = report.load_runs(multirun)
    wandb_server._runs = [FakeRun(f"sweep/{i}", "exp1", r.summary) for i, r in enumerate(local)]
    wandb_server._runs.append(FakeRun("other/0", "exp2", local[0].summary))
    monkeypatch_api = pytest.MonkeyPatch()
    monkeypatch_api.setattr("wandb.Api", lambda: wandb_server)
    try:
        md = report.build(tmp_path, tmp_path / "out", {}, "gmiexp", "team", use_wandb=True, wandb_group="exp1")
    finally:
        monkeypatch_api.undo()
    rows = list(csv.DictReader((tmp_path / "out" / "runs.csv").open()))
    want = list(csv.DictReader((multirun / "report" / "runs.csv").open())) if (multirun / "report").exists() else None
    assert [r["label"] for r in rows] == [r.label for r in local]
    assert [float(r["env_steps_per_s"]) for r in rows] == [round(r.steps_per_s, 1) for r in local]
    assert want is None or [r["vs_baseline"] for r in rows] == [r["vs_baseline"] for r in want]
    assert ("runs", "team/gmiexp", {"group": "exp1"}) in wandb_server.calls
    _, _, runsets = panel_metrics(wandb_server.saved_spec())
    assert [r["name"] for r in runsets] == ["exp1"]
    assert "exp1" in json.dumps(runsets[0]["filters"]) and "group" in json.dumps(runsets[0]["filters"])
    assert "W&B report created" in md.read_text()


@pytest.fixture
def sweep(tmp_path):
    """A gmis_per_gpu x seed sweep: 2 x 3 runs; seed 3 of gmis_per_gpu=2 is 20x slower (an outlier)."""
    root = tmp_path / "sweep"
    rates = {(1, 1): 1000.0, (1, 2): 1100.0, (1, 3): 900.0, (2, 1): 1500.0, (2, 2): 1700.0, (2, 3): 80.0}
    for job, ((gmis, seed), rate) in enumerate(rates.items()):
        s = summary(gmis, 64, rate, 300.0 + seed)
        s["config"]["seed"] = seed
        s["metrics"]["reward/mean"] = 10.0 * seed
        s["metrics"]["mem/workload_mb"] = 20.0 + gmis
        (root / str(job)).mkdir(parents=True)
        (root / str(job) / "summary.json").write_text(json.dumps(s))
    return root


def test_seeds_are_pooled_into_groups_with_mean_std_and_count(sweep, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    md = report.build(sweep, sweep / "report", {}).read_text()
    groups = list(csv.DictReader((sweep / "report" / "groups.csv").open()))
    assert [g["label"] for g in groups] == ["gmis_per_gpu=1", "gmis_per_gpu=2"]
    assert [int(g["runs"]) for g in groups] == [3, 3]
    assert float(groups[0]["env_steps_per_s_mean"]) == pytest.approx(1000.0)
    assert float(groups[0]["env_steps_per_s_std"]) == pytest.approx(100.0)  # sample std of 900, 1000, 1100
    assert float(groups[1]["reward_mean_mean"]) == pytest.approx(20.0)
    assert float(groups[0]["peak_rss_mb_mean"]) == pytest.approx(302.0)
    assert groups[0]["outliers"] == "" and groups[1]["outliers"].endswith("/5")
    runs = list(csv.DictReader((sweep / "report" / "runs.csv").open()))
    assert [r["outlier"] for r in runs] == ["False"] * 5 + ["True"]
    assert "| gmis_per_gpu=1 | 3/3 | 1,000 ± 100.0 |" in md
    assert "peak RSS (MB)" in md and "workload memory (MB)" in md


def test_groups_show_time_to_a_return_and_the_evaluated_policies(sweep, monkeypatch):
    """Time to the threshold from each run's (run-wide) history; mode=eval summaries join their runs, not the runs."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    for job, ret in ((0, 100.0), (1, 120.0), (3, 300.0)):
        (sweep / str(job) / "eval").mkdir()
        (sweep / str(job) / "eval" / "summary.json").write_text(json.dumps(
            {"status": "ok", "mode": "eval", "metrics": {"eval/return_mean": ret}}))
    md = report.build(sweep, sweep / "report", {}, threshold=14.0).read_text()
    groups = list(csv.DictReader((sweep / "report" / "groups.csv").open()))
    assert [int(g["runs"]) for g in groups] == [3, 3]  # the evaluations are not runs
    # rewards 10 + i x gmis at wall 0.5 i: 1 GMI reaches 14 at i=4 (2.0 s), 2 GMIs at i=2 (1.0 s)
    assert [float(g["time_to_return_s_mean"]) for g in groups] == [2.0, 1.0]
    assert float(groups[0]["eval_return_mean"]) == pytest.approx(110.0)
    assert float(groups[0]["eval_return_std"]) == pytest.approx(14.142, rel=1e-3)
    assert float(groups[1]["eval_return_mean"]) == 300.0
    assert "time to return (s)" in md and "evaluated return" in md and "wall seconds to 14.0" in md
    # without a threshold: the lowest group mean final return (1 GMI: 10, 20, 30 -> 20, never reached by 15)
    report.build(sweep, sweep / "report", {})
    groups = list(csv.DictReader((sweep / "report" / "groups.csv").open()))
    assert groups[0]["time_to_return_s_mean"] == "" and float(groups[1]["time_to_return_s_mean"]) == 2.5


def test_plots_label_their_axes_with_units(sweep, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    seen = {}
    real_save = report.save

    def spy(fig, path):
        ax = fig.axes[0]
        seen[path.name] = (ax.get_xlabel(), ax.get_ylabel(), [t.get_text() for t in ax.get_xticklabels()])
        return real_save(fig, path)

    monkeypatch.setattr(report, "save", spy)
    report.build(sweep, sweep / "report", {})
    assert seen["throughput.png"][:2] == ("group (runs that differ only in seed)",
                                          "env steps/s (mean ± std over seeds)")
    assert seen["throughput.png"][2] == ["gmis_per_gpu=1", "gmis_per_gpu=2"]
    assert seen["reward.png"][:2] == ("env steps (frames)", "mean episode return")
    assert seen["memory.png"][1] == "memory (MB, mean ± std over seeds)"


@pytest.mark.slow
def test_report_of_a_real_2x3_sweep(tmp_path, monkeypatch):
    from gmitest import run_cli

    monkeypatch.setenv("WANDB_MODE", "offline")
    r = run_cli("-m", "task=Cartpole", "num_gpus=1", "gmis_per_gpu=1,2", "seed=1,2,3", "num_envs=8",
                "train.horizon_length=8", "max_iterations=4", "train.minibatch_size=16", "train.mini_epochs=1",
                "launch.progress=false", f"hydra.sweep.dir={tmp_path}", timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    report.build(tmp_path, tmp_path / "report", {}, eval_episodes=2)
    groups = list(csv.DictReader((tmp_path / "report" / "groups.csv").open()))
    assert [g["label"] for g in groups] == ["gmis_per_gpu=1", "gmis_per_gpu=2"]
    assert all(int(g["ok"]) == 3 and float(g["env_steps_per_s_std"]) >= 0 for g in groups)
    assert all(float(g["eval_return_mean"]) > 0 for g in groups)  # each final policy played 2 episodes


def test_a_reshaped_run_gets_throughput_against_time_with_its_reshapes_marked(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    s = summary(1, 16, 1000.0, 300.0)
    s["started_at"] = 100.0
    for h in s["history"]:
        h["perf/epoch_env_steps_per_s"] = 900.0 if h["iteration"] < 3 else 1600.0
    s["reshapes"] = [{"epoch": 2, "from": 1, "to": 2, "started_at": 101.2, "cost_s": 8.0}]
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "summary.json").write_text(json.dumps(s))
    seen = {}
    real_save = report.save

    def spy(fig, path):
        ax = fig.axes[0]
        seen[path.name] = (ax.get_xlabel(), [line.get_xdata()[0] for line in ax.lines[1:]],
                           [t.get_text() for t in ax.texts])
        return real_save(fig, path)

    monkeypatch.setattr(report, "save", spy)
    text = report.build(tmp_path, tmp_path / "report", {}).read_text()
    assert "reshapes.png" in text and (tmp_path / "report" / "reshapes.png").stat().st_size > 1000
    xlabel, marks, notes = seen["reshapes.png"]
    assert xlabel == "wall time since the run started (s)"
    assert marks == [pytest.approx(1.2)] and notes == ["1->2"]
