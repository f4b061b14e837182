"""GMILogger on one short train=rslrl run with RND: gmiexp's return and episode length are rsl_rl's own figures (read
back from rsl_rl's TensorBoard log with TensorBoard's reader), the log keeps rsl_rl's keys, and the progress line
counts to the run's real total (rsl_rl's num_steps_per_env, not train.horizon_length)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from gmitest import run_cli

ENVS, STEPS, ITERATIONS = 4, 32, 3  # PointMass's episodes are 16 steps: 2 per environment and iteration
RND = "{weight:0.5,learning_rate:0.001,predictor_hidden_dims:[8],target_hidden_dims:[8],num_outputs:4}"
#: gmiexp's history keys -> rsl_rl's TensorBoard tags for the same figure
SAME = {"reward/mean": "Train/mean_reward", "episode/length": "Train/mean_episode_length",
        "reward/extrinsic_mean": "Rnd/mean_extrinsic_reward", "reward/intrinsic_mean": "Rnd/mean_intrinsic_reward"}


@pytest.fixture(scope="module")
def rnd_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """1 GMI of the tests' own VecEnv with RND, progress lines every poll; the run dir and its stderr."""
    run_dir = tmp_path_factory.mktemp("rnd")
    # train.horizon_length (rl-games' steps, the Plan's) differs from rsl_rl's num_steps_per_env on purpose
    r = run_cli("train=rslrl", "task=Cartpole", "task.vec_env=rslrl_vecenv:make", f"batch.total_envs={ENVS}",
                "gmis_per_gpu=1", f"max_iterations={ITERATIONS}", "train.horizon_length=16",
                f"+train.rslrl.num_steps_per_env={STEPS}", f"+train.rslrl.algorithm.rnd_cfg={RND}",
                "launch.progress=true", "launch.progress_interval_s=0.1", f"hydra.run.dir={run_dir}", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return run_dir, r.stderr


@pytest.mark.timeout(900)
def test_returns_and_lengths_are_rsl_rls_own_with_rnd(rnd_run: tuple[Path, str]) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, _ = rnd_run
    (events,) = (run_dir / "rsl_rl").glob("events.out.tfevents.*")
    acc = EventAccumulator(str(events))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"Train/mean_reward", "Train/mean_episode_length", "Rnd/mean_extrinsic_reward",
            "Rnd/mean_intrinsic_reward", "Rnd/weight", "Loss/learning_rate", "Policy/mean_std",
            "Perf/total_fps"} <= tags, sorted(tags)  # rsl_rl's keys, as rsl_rl writes them
    rows = [json.loads(x) for x in (run_dir / "gmis" / "0" / "history.jsonl").read_text().splitlines()]
    run_rows = json.loads((run_dir / "summary.json").read_text())["history"]
    assert len(rows) == len(run_rows) == ITERATIONS
    for key, tag in SAME.items():
        tb = {e.step: e.value for e in acc.Scalars(tag)}  # rsl_rl's step: the iteration from 0
        assert sorted(tb) == list(range(ITERATIONS)), (tag, tb)
        ours = [np.float32(r[key]) for r in rows]  # TensorBoard keeps float32
        assert ours == [np.float32(tb[i]) for i in range(ITERATIONS)], (key, ours, tb)
        assert [np.float32(r[key]) for r in run_rows] == ours  # 1 GMI: the run-wide window is the GMI's
    intrinsic = [r["reward/intrinsic_mean"] for r in rows]
    assert all(x != 0 for x in intrinsic)  # RND's part is there, and counted in the return as rsl_rl counts it
    assert [r["reward/mean"] for r in rows] == pytest.approx(
        [r["reward/extrinsic_mean"] + r["reward/intrinsic_mean"] for r in rows], rel=1e-5)


def test_the_progress_line_counts_to_the_runs_real_total(rnd_run: tuple[Path, str]) -> None:
    run_dir, stderr = rnd_run
    total = ENVS * STEPS * ITERATIONS  # 384; the Plan's horizon_length would say 192
    status = json.loads((run_dir / "gmis" / "0" / "status.json").read_text())
    assert status["total_frames"] == total
    lines = [ln for ln in stderr.splitlines() if re.match(r"gmiexp progress: [\d,]+/", ln)]
    assert lines, stderr[-2000:]
    assert all(f"/{total:,} frames" in ln for ln in lines), lines
    assert lines[-1].startswith(f"gmiexp progress: {total:,}/{total:,} frames (100%) | iteration {ITERATIONS}")
