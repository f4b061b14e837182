"""Hydra's Optuna sweeper drives gmiexp: each job returns its ``objective`` metric; a failed job fails its trial."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from gmitest import run_cli

pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")

TINY = ["task=Cartpole", "num_gpus=1", "gmis_per_gpu=1", "launch.inprocess=true", "max_iterations=2",
        "launch.progress=false", "train.horizon_length=16", "train.minibatch_size=256", "train.mini_epochs=1"]
OPTUNA = ["-m", "hydra/sweeper=optuna", "hydra.sweeper.direction=maximize", "hydra.sweeper.sampler.seed=1"]


@pytest.mark.parametrize("objective", ["perf/env_steps_per_s", pytest.param("reward/mean", marks=pytest.mark.slow)])
def test_optuna_maximises_the_objective_over_two_trials(objective: str, tmp_path: Path) -> None:
    r = run_cli(*OPTUNA, "hydra.sweeper.n_trials=2", "num_envs=choice(16,32)", f"objective={objective}", *TINY,
                f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    values = [json.loads((tmp_path / str(i) / "summary.json").read_text())["metrics"][objective] for i in (0, 1)]
    result = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    assert result["best_value"] == pytest.approx(max(values))
    assert result["best_params"]["num_envs"] in (16, 32)


def test_failed_run_is_a_failed_trial(tmp_path: Path) -> None:
    r = run_cli(*OPTUNA, "hydra.sweeper.n_trials=1", "role=user_roles:FailRole", "num_envs=choice(16)", *TINY,
                f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == 1, r.stderr[-3000:]
    assert "Failed experiment" in r.stderr and "1 multirun job(s) failed" in r.stderr
    assert "float-castable" not in r.stderr
