"""Every policy kind trains end to end in the experience layouts (2 trainer GMIs), and serves in tcg.

CNN policies run on uint8 frames of the test pixel simulator (tests/helpers/pixel_sim.py, registered
in the CLI process by ``pixel_sim.main`` and in the GMIs by importing the role) on the ``lazy``
stand-in device; RNN and multi-discrete policies run on the host (the lazy backend runs no torch
LSTM/GRU, refused at plan time, and no multi-output view such as rl-games' ``torch.split`` of
multi-discrete actions). The trainers of a run must end with the same weights, moved from where they started.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gmitest import cli_env, slow_where

from gmiexp.plan import Plan

SMALL = ["num_envs=4", "max_iterations=2", "launch.progress=false", "train.minibatch_size=16",
         "train.mini_epochs=1", "async_train.max_policy_lag=100", "hardware=cpu"]
TWO_TRAINERS = {"tdg_ex": ["num_gpus=2", "gmis_per_gpu=1"],
                "decoupled_async": ["num_gpus=2", "gmis_per_gpu=1", "layout.trainers_per_gpu=2"]}
GRU = "++task.rnn={name: gru, units: 8, layers: 1, before_mlp: false}"
LSTM = "++task.rnn={name: lstm, units: 8, layers: 1, before_mlp: true}"

CASES = {
    "tdg_ex-cnn-separate-lazy": ["layout=tdg_ex", "task=pixels", "task.separate=true", "role=pixel_sim:PixelTDGEX",
                                 "train.device=lazy", "train.horizon_length=8", *TWO_TRAINERS["tdg_ex"]],
    "decoupled_async-cnn-separate-lazy": ["layout=decoupled_async", "task=pixels", "task.separate=true",
                                          "role=pixel_sim:PixelA3C", "train.device=lazy", "train.horizon_length=8",
                                          *TWO_TRAINERS["decoupled_async"]],
    "tdg_ex-rnn-gru": ["layout=tdg_ex", "task=Cartpole", GRU, "train.device=cpu", "train.horizon_length=8",
                       "train.seq_length=4", *TWO_TRAINERS["tdg_ex"]],
    # rl-games' multi-discrete head splits its actions (torch.split), a multi-output view the lazy backend lacks
    "decoupled_async-cnn-rnn-lstm-separate-multi_discrete": [
        "layout=decoupled_async", "task=pixels_multi", LSTM, "task.separate=true", "role=pixel_sim:PixelA3C",
        "train.device=cpu", "train.horizon_length=8", "train.seq_length=4", *TWO_TRAINERS["decoupled_async"]],
    "tcg-cnn-rnn": ["layout=tcg", "task=pixels", GRU, "role=pixel_sim:PixelServe", "train.device=cpu",
                    "gmis_per_gpu=1", "train.horizon_length=8"],
    "tdg-rnn": ["layout=tdg", "task=Cartpole", LSTM, "train.device=cpu", "gmis_per_gpu=2", "train.horizon_length=8"],
}


#: RNNs run by default in decoupled_async (LSTM) and tcg (GRU); these take the same paths in their sibling layouts.
#: decoupled_async's CNN with a separate critic on lazy: the default suite keeps the same policy on lazy in its
#: sibling tdg_ex (tdg_ex-cnn-separate-lazy; both layouts' trainers are gmiexp.rl.experience.roles'
#: ExperienceRole) and decoupled_async's trainers on a CNN with a separate critic
#: (decoupled_async-cnn-rnn-lstm-separate-multi_discrete), and decoupled_async on lazy
#: (tests/layouts/test_lazy_device.py)
SLOW_CASES = {"tdg_ex-rnn-gru", "tdg-rnn", "decoupled_async-cnn-separate-lazy"}


@pytest.mark.parametrize("case", slow_where(CASES, SLOW_CASES))
def test_policy_kind_trains(case: str, tmp_path: Path, no_orphans: None) -> None:
    run_dir = tmp_path / "run"
    args = [*SMALL, *CASES[case], f"hydra.run.dir={run_dir}"]
    r = subprocess.run([sys.executable, "-c", f"import pixel_sim; pixel_sim.main({args!r})"],
                       capture_output=True, text=True, timeout=300, env=cli_env())
    assert r.returncode == 0, r.stderr[-3000:]
    plan = Plan.load(run_dir / "plan.yaml")
    s = json.loads((run_dir / "summary.json").read_text())
    gmis = {g.id: s["gmis"][str(g.id)] for g in plan.gmis}
    if plan.layout in ("tcg", "tdg"):
        assert sum(g.get("predictions", 0) for g in gmis.values()) == 2 * 8 * 4
        return
    trainers = [gmis[t] for t in plan.trainer_group]
    assert len(trainers) == 2 and all(t["seq_errors"] == 0 for t in trainers)
    assert sum(t["train_samples"] for t in trainers) > 0 and all(t["updates"] > 0 for t in trainers)
    assert len({t["weights_digest"] for t in trainers}) == 1
    assert trainers[0]["weights_digest"] != trainers[0]["start_digest"]
