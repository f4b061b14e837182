"""A re-shape keeps what it can of the run (rl-games, tcg_ex; issue 42, item 3).

A run on one partition stops at epoch 2; another starts from its checkpoint on the other partition (1 -> 2 and
2 -> 1 GMIs, the same global batch: ``checkpoint=`` with another ``gmis_per_gpu``, what the elastic loop does
through ``launch.requeue.resume``, checked at the end). What each new GMI goes on from, against the checkpoint and
against a fresh start of its partition:

* generators: no GMI draws a fresh start's streams (its generators after its first epoch differ from a fresh
  run's after epoch 1); GMI r < the old world size goes on with old GMI r's, a GMI beyond them with its segment's;
* weights and normalisers equal the checkpoint's, and so do the learning rate, entropy coefficient, epoch and frame;
* the torch cart-pole's environments and running episodes are carried to whichever new GMI holds them: no episode
  cut, said once;
* envpool (Ant) cannot save its state: its episodes in progress are cut, counted (episodes and frames), said once.

Before the re-shape carried anything, every new GMI drew the streams of a fresh start ('GMI 0 replays a fresh
start's torch stream'), and every episode in progress was cut.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from gmitest import compose_config, popen_cli

from gmiexp.app import run_job
from gmiexp.planner.seeds import process_seed
from gmiexp.rl.rlgames.checkpoint import RUN_KEY, SCHEDULE_KEY
from gmiexp.rl.state import state_digest
from gmiexp.tools import reshape as tool

TOTAL_ENVS, HORIZON = 32, 16
RUN = ["task=Cartpole", f"batch.total_envs={TOTAL_ENVS}", "batch.total_minibatch=256",
       f"train.horizon_length={HORIZON}", "train.mini_epochs=2", "train.torch_threads=1", "seed=7",
       "train.save_frequency=1", "launch.progress=false"]
STOP, LR = 2, 3e-4  # the epoch the re-shape starts from; train.learning_rate's default


def train(run_dir: Path, gmis: int, *extra: str) -> dict[str, Any]:
    code, summary = run_job(compose_config(*RUN, f"gmis_per_gpu={gmis}", f"hydra.run.dir={run_dir}", *extra),
                            run_dir)
    assert code == 0 and summary is not None, f"run in {run_dir} exited {code}"
    return summary


def checkpoint(run_dir: Path, epoch: int) -> dict[str, Any]:
    """The run's checkpoint of ``epoch`` (the newest of that epoch's files: they hold the same state)."""
    found = sorted((run_dir / "rl_games" / "run" / "nn").glob(f"last_*_ep_{epoch}_*.pth"),
                   key=lambda p: p.stat().st_mtime)
    assert found, f"no epoch-{epoch} checkpoint in {run_dir}"
    return torch.load(found[-1], map_location="cpu", weights_only=False) | {"path": found[-1]}


def reports(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [summary["gmis"][str(i)]["resume"] for i in range(len(summary["gmis"]))]


def said(run_dir: Path) -> list[str]:
    return [line for log in run_dir.glob("logs/**/*.log") for line in log.read_text().splitlines()
            if line.startswith("gmiexp: resumed")]


def same_streams(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return torch.equal(a["torch"], b["torch"]) and torch.equal(a["numpy"]["keys"], b["numpy"]["keys"]) \
        and list(a["random"][1]) == list(b["random"][1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``fixed(g)``: a run of g GMIs to epoch 2 (a fresh start); ``reshaped(a, b)``: from a's epoch 2 on b GMIs."""
    root = tmp_path_factory.mktemp("reshape")
    made: dict[Any, Path] = {}

    def fixed(gmis: int) -> Path:
        if gmis not in made:
            made[gmis] = root / f"fixed{gmis}"
            train(made[gmis], gmis, f"max_iterations={STOP}")
        return made[gmis]

    def reshaped(frm: int, to: int) -> tuple[Path, dict[str, Any]]:
        if (frm, to) not in made:
            run_dir = root / f"from{frm}to{to}"
            made[frm, to] = run_dir
            train(run_dir, to, f"max_iterations={STOP + 1}", f"checkpoint={checkpoint(fixed(frm), STOP)['path']}")
        return made[frm, to], json.loads((made[frm, to] / "summary.json").read_text())

    return fixed, reshaped


DIRECTIONS = [(1, 2), pytest.param(2, 1, marks=pytest.mark.slow)]  # slow: 2 -> 1 takes two more runs


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("frm", "to"), DIRECTIONS)
def test_a_reshape_goes_on_with_the_run_s_streams_and_replays_none(frm: int, to: int, runs: Any,
                                                                   no_orphans: None) -> None:
    fixed, reshaped = runs
    run_dir, summary = reshaped(frm, to)
    after = checkpoint(run_dir, STOP + 1)[RUN_KEY]["gmis"]
    fresh = checkpoint(fixed(to), 1)[RUN_KEY]["gmis"]  # a fresh start of this partition, after its first epoch
    for r in range(to):
        assert not same_streams(after[r]["generators"], fresh[r]["generators"]), \
            f"GMI {r} replays a fresh start's streams"
    got = [rep["streams"] for rep in reports(summary)]
    assert got == [f"GMI {r}'s" if r < frm else f"seed {process_seed(7, r, 1)}" for r in range(to)]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("frm", "to"), DIRECTIONS)
def test_a_reshape_keeps_normalisers_schedule_counters_and_every_running_episode(frm: int, to: int, runs: Any,
                                                                               no_orphans: None) -> None:
    fixed, reshaped = runs
    run_dir, summary = reshaped(frm, to)
    saved = checkpoint(fixed(frm), STOP)
    model = saved["model"]
    assert all(int(model[k]) > 0 for k in model if k.endswith("mean_std.count"))  # normalisers that learned
    assert saved[SCHEDULE_KEY]["last_lr"] != LR  # the adaptive schedule moved: a restart from LR would show
    in_progress = sum(r["in_progress"] for r in saved[RUN_KEY]["gmis"])
    assert in_progress > 0  # episodes a cut would lose
    for r, rep in enumerate(reports(summary)):
        assert rep["reshaped"] == {"from": frm, "to": to} and rep["segment"] == 1, rep
        assert rep["model"] == state_digest(model), f"GMI {r}: weights or normalisers are not the checkpoint's"
        assert rep["schedule"] == saved[SCHEDULE_KEY], f"GMI {r}: {rep['schedule']} != {saved[SCHEDULE_KEY]}"
        assert (rep["epoch"], rep["frame"]) == (saved["epoch"], saved["frame"])
        assert (rep["simulator"], rep["episodes_cut"], rep["frames_cut"]) == (True, 0, 0), rep
    first = summary["history"][0]
    assert (first["iteration"], first["frames"]) == (STOP + 1, saved["frame"] + TOTAL_ENVS * HORIZON)
    assert said(run_dir) == [f"gmiexp: resumed after epoch {STOP} (segment 1) on another partition ({frm} -> {to} "
                             "GMIs): generators, simulator and running episodes carried over: no episode cut"]


@pytest.mark.slow  # slow: envpool's import in every GMI (test_carry.py checks the count in the default suite)
@pytest.mark.timeout(600)
def test_envpool_cannot_carry_its_episodes_and_says_how_many_it_cut(tmp_path: Path, no_orphans: None) -> None:
    ant = ["task=Ant", "batch.total_envs=8", "batch.total_minibatch=64", "train.horizon_length=8"]
    train(tmp_path / "one", 1, *ant, f"max_iterations={STOP}")
    saved = checkpoint(tmp_path / "one", STOP)
    (old,) = saved[RUN_KEY]["gmis"]
    episodes, frames = old["in_progress"], int(old["episodes"]["current_lengths"].sum())
    assert 0 < episodes <= 8 and frames > 0
    summary = train(tmp_path / "two", 2, *ant, f"max_iterations={STOP + 1}", f"checkpoint={saved['path']}")
    for rep in reports(summary):
        assert (rep["simulator"], rep["episodes_cut"], rep["frames_cut"]) == (False, episodes, frames), rep
    assert said(tmp_path / "two") == [
        f"gmiexp: resumed after epoch {STOP} (segment 1) on another partition (1 -> 2 GMIs): generators carried "
        f"over, but the simulator cannot save its state per environment; {episodes} episodes in progress were cut "
        f"({frames} frames; the environments start new ones from segment 1's seeds)"]


@pytest.mark.slow  # slow: a re-shape requested of a running job (~60 s); checkpoint= above takes the same path
@pytest.mark.timeout(600)
def test_a_requested_reshape_carries_the_run_as_a_start_from_its_checkpoint_does(tmp_path: Path,
                                                                                 no_orphans: None) -> None:
    """The elastic loop (launch/segments.py) resumes through launch.requeue.resume, as ``checkpoint=`` does."""
    run_dir = tmp_path / "run"
    p = popen_cli(*RUN, "gmis_per_gpu=1", "max_iterations=40", "launch.reshape=request", f"hydra.run.dir={run_dir}")
    try:
        deadline = time.monotonic() + 180
        hist = run_dir / "gmis" / "0" / "history.jsonl"
        while not (hist.exists() and len(hist.read_text().splitlines()) >= 3):
            assert time.monotonic() < deadline and p.poll() is None, "the run did not reach epoch 3"
            time.sleep(0.2)
        assert tool.main([str(run_dir), "gmis_per_gpu=2"]) == 0
        _, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    (rec,) = summary["reshapes"]
    for r, rep in enumerate(reports(summary)):
        assert rep["reshaped"] == {"from": 1, "to": 2} and rep["epoch"] == rec["epoch"], rep
        assert (rep["simulator"], rep["episodes_cut"], rep["frames_cut"]) == (True, 0, 0), rep
        assert rep["streams"] == ("GMI 0's" if r == 0 else f"seed {process_seed(7, 1, 1)}")
