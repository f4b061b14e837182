"""Live metrics: W&B (read back with wandb's own records) and TensorBoard hold the run's rows while it trains;
Ctrl-C keeps what was trained; summary.json, history, W&B and the report agree on every metric."""

from __future__ import annotations

import csv
import json
import signal
import time
from pathlib import Path

import pytest
import torch
from gmitest import compose_config, popen_cli, run_cli
from wandb_records import read_run, records

from gmiexp.launch.live import GAMES_TO_TRACK, RunRows
from gmiexp.launch.progress import PHASES
from gmiexp.planner.build import build_plan
from gmiexp.tools import report

SMALL = ("train.minibatch_size=64", "train.mini_epochs=1", "launch.progress_interval_s=1")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")


def wandb_history(run_dir: Path) -> list[dict]:
    try:
        return read_run(run_dir, finished=False)["history"]
    except (ValueError, AssertionError):  # the .wandb file is not there yet
        return []


def tensorboard_scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def wait_for(check, timeout_s: float = 240.0, proc=None):  # noqa: ANN001, ANN201
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            return check()
        time.sleep(0.5)
    return check()


def live_run(tmp_path: Path, layout: str, task: str, iterations: int, *extra: str) -> tuple[list[dict], dict]:
    """Start a run, read its W&B file while it trains (the first epochs), then after it ends."""
    proc = popen_cli(f"task={task}", f"layout={layout}", "num_gpus=1", "num_envs=8", "train.horizon_length=8",
                     f"max_iterations={iterations}", "logger=wandb", *SMALL, *extra, f"hydra.run.dir={tmp_path}")
    try:
        early = wait_for(lambda: wandb_history(tmp_path), proc=proc)
        still_training = proc.poll() is None
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert still_training and early, "no W&B row while the run trained"
    assert len(early) < iterations
    progress = [line for line in err.splitlines() if line.startswith("gmiexp progress: ")]
    # the phase it waits in (the first line may come after the GMIs started importing, on a loaded host), then frames
    assert progress[0].startswith(tuple(f"gmiexp progress: {p}" for p in PHASES.values())), progress[0]
    assert "(100%)" in progress[-1], progress[-1]  # a finished run ends at 100% of its own frames
    return early, json.loads((tmp_path / "summary.json").read_text())


def check_per_epoch(run_dir: Path, summary: dict, keys: tuple[str, ...]) -> None:
    wb = read_run(run_dir)
    rows = wb["history"]
    assert len(rows) == len(summary["history"]) == summary["config"]["max_iterations"]
    frames = [r["frames"] for r in rows]
    assert frames == sorted(frames) and frames[-1] == summary["metrics"]["frames"]
    for k in keys:
        assert all(k in r for r in rows[-3:]), k
    # frames is the step metric of every other metric (wandb's define_metric record)
    metric = [r.metric for r in records(next(run_dir.glob("wandb/offline-run-*/run-*.wandb")))
              if r.WhichOneof("record_type") == "metric"]
    assert any(m.glob_name == "*" and m.step_metric == "frames" for m in metric)
    tb = tensorboard_scalars(run_dir)
    for k in keys:
        assert [s for s, _ in tb[k]][-1] == frames[-1], k


@pytest.fixture(scope="module")
def tcg_ex_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One tcg_ex run (the default layout) with W&B, read while it trains and after: its run dir and summary.

    Shared by the live-rows check and the summary/history/W&B/report check (a launch less, seconds of CPU)."""
    run_dir = tmp_path_factory.mktemp("tcg_ex") / "run"
    _early, summary = live_run(run_dir, "tcg_ex", "Cartpole", 300, "gmis_per_gpu=2",  # W&B offline: cli_env()
                               "train.info_key=time_outs")
    return run_dir, summary


def test_tcg_ex_rows_reach_wandb_while_training(tcg_ex_run: tuple[Path, dict]) -> None:
    run_dir, summary = tcg_ex_run
    check_per_epoch(run_dir, summary, ("loss/actor", "loss/critic", "loss/entropy", "train/kl", "train/lr",
                                       "train/clip_frac", "train/grad_norm", "reward/mean", "episode/length",
                                       "perf/env_steps_per_s", "time/sim_s", "info/time_outs"))


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_tdg_ex_rows_reach_wandb_while_training(tmp_path: Path) -> None:
    _early, summary = live_run(tmp_path, "tdg_ex", "Cartpole", 200, "gmis_per_gpu=3", "train.minibatch_size=16")
    check_per_epoch(tmp_path, summary, ("loss/total", "train/kl", "train/lr", "reward/mean",
                                        "async/train_samples_per_s", "perf/env_steps_per_s"))
    # frames is the run's: every agent's steps, not the lead GMI's
    agents = [int(g) for g, r in summary["gmis"].items() if "frames_local" in r]
    assert len(agents) >= 2
    assert summary["metrics"]["frames"] == sum(summary["gmis"][str(g)]["frames_local"] for g in agents)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["tcg_ex", "tdg_ex"])
def test_ant_80_epochs_live_in_wandb(tmp_path: Path, layout: str) -> None:
    """80 epochs: W&B's offline writer starts in a few seconds, and 20 such epochs ended before it wrote a row."""
    extra = ("gmis_per_gpu=3", "train.minibatch_size=16") if layout == "tdg_ex" else ("gmis_per_gpu=2",)
    _early, summary = live_run(tmp_path, layout, "Ant", 80, *extra)
    keys = ("train/kl", "train/lr", "reward/mean") + (("loss/actor", "loss/critic") if layout == "tcg_ex"
                                                       else ("loss/total",))
    check_per_epoch(tmp_path, summary, keys)


@pytest.mark.parametrize("layout", ["tcg", "decoupled_async"])
def test_tensorboard_for_every_layout(tmp_path: Path, layout: str) -> None:
    gmis = "gmis_per_gpu=2"
    r = run_cli("task=Cartpole", f"layout={layout}", "num_gpus=1", gmis, "num_envs=8", "train.horizon_length=8",
                "max_iterations=3", "train.minibatch_size=16", "launch.progress=false", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    tb = tensorboard_scalars(tmp_path)
    assert [v for _, v in tb["perf/env_steps_per_s"]][-1] == pytest.approx(summary["metrics"]["perf/env_steps_per_s"])
    assert [s for s, _ in tb["perf/env_steps_per_s"]][-1] == summary["metrics"]["frames"]


def test_a_final_row_the_lead_stopped_short_of_has_its_own_iteration(tmp_path: Path) -> None:
    """decoupled_async agents stop on their own: one may roll out an iteration more than the lead."""
    plan, _ = build_plan(compose_config("task=Cartpole", "layout=decoupled_async", "gmis_per_gpu=2"), tmp_path)
    for g, n in ((0, 2), (1, 3)):
        (tmp_path / "gmis" / str(g)).mkdir(parents=True)
        rows = [{"iteration": 10 + i, "time": 1.0 + i, "local_frames": 8, "reward/mean": float(i)} for i in range(n)]
        (tmp_path / "gmis" / str(g) / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows = RunRows(plan, tmp_path, t0=0.0).poll(final=True)
    assert [(r["iteration"], r["frames"]) for r in rows] == [(10, 16), (11, 32), (12, 40)]


def test_sigint_keeps_what_was_trained_and_resume_continues_frames(tmp_path: Path) -> None:
    run1 = tmp_path / "run1"
    proc = popen_cli("task=Cartpole", "num_gpus=1", "gmis_per_gpu=2", "num_envs=8", "train.horizon_length=8",
                     "max_iterations=5000", "logger=wandb", *SMALL, f"hydra.run.dir={run1}")
    try:
        assert wait_for(lambda: len(wandb_history(run1)) >= 3, proc=proc), proc.communicate()[1][-3000:]
        proc.send_signal(signal.SIGINT)  # the launcher relays it to the GMIs, as elastic does for a Ctrl-C
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert out.startswith("gmiexp interrupted:")
    summary = json.loads((run1 / "summary.json").read_text())
    assert summary["status"] == "interrupted" and "SIGINT" in summary["error"]
    assert summary["metrics"]["perf/env_steps_per_s"] > 0 and summary["metrics"]["reward/mean"] is not None
    epochs = len(summary["history"])
    assert 3 <= epochs < 5000 and summary["metrics"]["frames"] == summary["history"][-1]["frames"]
    wb = read_run(run1)
    assert wb["summary"]["status"] == "interrupted" and len(wb["history"]) == epochs
    (ckpt,) = (run1 / "rl_games").glob("*/nn/last_*.pth")
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert state["frame"] == summary["metrics"]["frames"] and "model" in state

    run2 = tmp_path / "run2"
    r = run_cli("task=Cartpole", "num_gpus=1", "gmis_per_gpu=2", "num_envs=8", "train.horizon_length=8",
                "max_iterations=2", *SMALL, f"checkpoint={ckpt}", f"hydra.run.dir={run2}")
    assert r.returncode == 0, r.stderr[-3000:]
    resumed = json.loads((run2 / "summary.json").read_text())
    assert resumed["resumed"] == {"checkpoint": str(ckpt)}
    assert resumed["history"][0]["frames"] == state["frame"] + 2 * 8 * 8


def test_summary_history_wandb_and_report_agree(tcg_ex_run: tuple[Path, dict], tmp_path: Path) -> None:
    """On the live test's finished run: the same command this test ran on its own (tcg_ex is the default layout,
    2 GMIs, W&B), 300 epochs instead of 4."""
    run, summary = tcg_ex_run
    metrics = {k: v for k, v in summary["metrics"].items() if v is not None}
    last = summary["history"][-1]
    wb = read_run(run)
    # W&B: every summary metric, and the same rows as the summary's history
    assert {k: wb["summary"][k] for k in metrics} == pytest.approx(metrics)
    assert [h["frames"] for h in wb["history"]] == [h["frames"] for h in summary["history"]]
    for k, v in last.items():
        assert wb["history"][-1][k] == pytest.approx(v), k
    # history: every metric it has ends where the summary is (running totals and rates so far)
    for k in set(metrics) & set(last):
        assert last[k] == pytest.approx(metrics[k], rel=1e-6), k
    # the report's table: the summary's figures
    out = tmp_path / "report"
    assert report.main([str(run), "--out", str(out)]) == 0
    (row,) = list(csv.DictReader((out / "runs.csv").open()))
    assert float(row["env_steps_per_s"]) == pytest.approx(metrics["perf/env_steps_per_s"], rel=1e-3)
    assert float(row["reward_mean"]) == pytest.approx(metrics["reward/mean"], rel=1e-6)
    assert float(row["peak_rss_mb"]) == pytest.approx(metrics["mem/peak_rss_mb"], rel=1e-6)
    assert float(row["workload_mb"]) == pytest.approx(metrics["mem/workload_mb"], rel=1e-6)


@pytest.mark.parametrize("gmis", [2, 4])
def test_experience_rows_report_the_mean_of_the_runs_last_episodes(tmp_path: Path, gmis: int) -> None:
    """Simulator GMIs list the episodes they finished; the run row's return is the last N of them over every GMI."""
    plan, _ = build_plan(compose_config("task=Cartpole", "layout=decoupled_async", f"gmis_per_gpu={gmis}"), tmp_path)
    n = GAMES_TO_TRACK
    sims = [g.id for g in plan.gmis if g.has("simulator")]
    every: list[float] = []  # in the order the run finished them: iteration by iteration, GMIs in id order
    hist: dict[int, list[dict]] = {g: [] for g in sims}
    for i in range(40):
        for g in sims:
            done = [100.0 * i + 10 * g + j for j in range((i + g) % 5)]
            every += done
            own = ([v for r in hist[g] for v in r["episodes/returns"]] + done)[-n:]
            hist[g].append({"iteration": i, "time": 1.0 + i, "local_frames": 8, "episodes/returns": done,
                            "episodes/lengths": [5.0] * len(done), "reward/mean": sum(own) / len(own) if own else None,
                            "gmi/reward/mean": sum(own) / len(own) if own else None})
    for g in sims:
        (tmp_path / "gmis" / str(g)).mkdir(parents=True)
        (tmp_path / "gmis" / str(g) / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in hist[g]))
    rows = RunRows(plan, tmp_path, t0=0.0).poll(final=True)
    assert len(every) > n
    assert rows[-1]["reward/mean"] == pytest.approx(sum(every[-n:]) / n)
    assert rows[-1]["reward/mean"] != rows[-1][f"gmi/{sims[0]}/reward/mean"]
    assert rows[-1]["episode/length"] == 5.0
    assert {k for k in rows[-1] if k.startswith("gmi/")} == {f"gmi/{g}/reward/mean" for g in sims}
