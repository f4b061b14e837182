"""checkpoint= resumes the experience layouts too: weights, normalisers, Adam state and counters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from gmitest import FAST, run_cli

from gmiexp.rl.rlgames.checkpoint import state_digest


def run(run_dir: Path, *extra: str) -> dict:
    r = run_cli(*FAST, "gmis_per_gpu=1", "async_train.max_policy_lag=100", f"hydra.run.dir={run_dir}", *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((run_dir / "summary.json").read_text())
    (trainer,) = [g for g in s["gmis"].values() if "updates" in g]
    return trainer


def adam_steps(path: str) -> float:
    state = torch.load(path, weights_only=False)
    return float(state["optimizer"]["state"][0]["step"])


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_experience_layouts_resume_weights_optimiser_and_counters(tmp_path: Path, no_orphans: None) -> None:
    first = run(tmp_path / "a", "layout=tdg_ex", "max_iterations=2")
    ckpt = first["checkpoint"]
    saved = torch.load(ckpt, weights_only=False)
    assert state_digest(saved["model"]) == first["weights_digest"]  # the trained weights, normalisers included
    assert (saved["epoch"], saved["frame"]) == (2, 2 * 15 * 32)

    again = run(tmp_path / "b", "layout=tdg_ex", "max_iterations=1", f"checkpoint={ckpt}")
    assert again["start_digest"] == first["weights_digest"]  # it started from the checkpoint, not from scratch
    assert (again["resumed_epoch"], again["epoch"], again["frame"]) == (2, 3, 3 * 15 * 32)
    assert adam_steps(again["checkpoint"]) == adam_steps(ckpt) + again["updates"] * 2  # 2 mini-epochs per update

    other = run(tmp_path / "c", "layout=decoupled_async", "num_gpus=2", "max_iterations=1", f"checkpoint={ckpt}")
    assert other["start_digest"] == first["weights_digest"] and other["resumed_epoch"] == 2
