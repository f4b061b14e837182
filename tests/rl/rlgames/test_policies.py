"""Every policy kind through rl-games' own agents in tcg_ex: discrete MLP, CNN on uint8 frames, RNN, separate critic.

With 2 GMIs on the CPU the GMIs must stay bit-identical (weights and normalisers, ``train.check_sync``), and with
1 GMI on the ``lazy`` stand-in every tensor must be on the device (a forgotten ``.to`` raises there).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from gmitest import run_cli, slow_where

from gmiexp.status import read_history

SMALL = ["max_iterations=2", "train.horizon_length=8", "train.mini_epochs=1", "launch.progress=false",
         "train.check_sync=true"]
TINY_CONVS = ("task.cnn.convs=[{filters:4,kernel_size:8,strides:4,padding:0},"
              "{filters:8,kernel_size:4,strides:2,padding:0}]")
POLICIES = {
    "discrete-mlp": ["task=CartPoleEnvpool", "num_envs=8", "train.minibatch_size=32"],
    "cnn": ["task=Pong", "num_envs=2", "train.minibatch_size=16", TINY_CONVS, "task.mlp_units=[32]"],
    "rnn": ["task=CartPoleEnvpool", "num_envs=8", "train.minibatch_size=32", "train.seq_length=4",
            "+task.rnn={name:lstm,units:16,layers:1,before_mlp:true,concat_output:true}"],
    "separate": ["task=PendulumGym", "task.separate=true", "num_envs=8", "train.minibatch_size=32"],
}


def train(run_dir: Path, *args: str) -> dict:
    r = run_cli(*SMALL, *args, f"hydra.run.dir={run_dir}", timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads((run_dir / "summary.json").read_text())


def last_model(run_dir: Path) -> dict:
    ckpt = sorted((run_dir / "rl_games" / "run" / "nn").glob("last_*.pth"))[-1]
    return torch.load(ckpt, map_location="cpu", weights_only=False)["model"]


def check_policy(kind: str, model: dict) -> None:
    """The checkpoint holds the network the kind asks for."""
    if kind == "cnn":  # conv weights, and the observation normaliser over whole (4, 84, 84) frames
        assert model["a2c_network.actor_cnn.0.weight"].shape == (4, 4, 8, 8)
        assert model["running_mean_std.running_mean"].shape == (4, 84, 84)
    elif kind == "rnn":
        assert "a2c_network.rnn.rnn.weight_hh_l0" in model
    elif kind == "separate":
        assert "a2c_network.critic_mlp.0.weight" in model
    else:
        assert model["a2c_network.logits.weight"].shape == (2, 32)


#: a discrete MLP on 2 GMIs (test_ppo_training) and on lazy (test_agent_lazy, Cartpole) runs by default elsewhere
SLOW_KINDS = {"discrete-mlp"}


@pytest.mark.parametrize("kind", slow_where(POLICIES, SLOW_KINDS))
def test_two_gmis_train_every_policy_kind_in_step(kind: str, tmp_path: Path, no_orphans: None) -> None:
    s = train(tmp_path, "gmis_per_gpu=2", *POLICIES[kind])
    d0, d1 = ([r["sync/digest"] for r in read_history(tmp_path, g)] for g in (0, 1))
    assert len(d0) == 2 and d0 == d1 and d0[0] != d0[1]  # trained, and identically on both GMIs
    assert set(s["gmis"]) == {"0", "1"}
    check_policy(kind, last_model(tmp_path))


@pytest.mark.parametrize("kind", slow_where([k for k in POLICIES if k != "rnn"], SLOW_KINDS))
def test_one_gmi_trains_every_policy_kind_on_lazy(kind: str, tmp_path: Path, no_orphans: None) -> None:
    s = train(tmp_path, "gmis_per_gpu=1", "train.device=lazy", *POLICIES[kind])
    assert s["gmis"]["0"]["epochs"] == 2
    check_policy(kind, last_model(tmp_path))


def test_a_recurrent_policy_on_lazy_is_refused_naming_the_devices_that_run_it(tmp_path: Path) -> None:
    r = run_cli("mode=plan", "train.device=lazy", "gmis_per_gpu=1", *POLICIES["rnn"], f"hydra.run.dir={tmp_path}")
    assert r.returncode == 2
    assert "invalid train.device: 'lazy'; valid: auto, cpu, cuda" in r.stderr and "LSTM/GRU" in r.stderr
