"""What the learner does not apply exits 2 at plan time with an experience layout; nothing is launched."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config

from gmiexp.app import run
from gmiexp.config.support import RLGAMES_ONLY, refused

EXPERIENCE = ["layout=tdg_ex", "task=Cartpole", "gmis_per_gpu=1", "num_envs=8", "max_iterations=1"]

CASES = [
    (["train.mixed_precision=true"], "invalid train.mixed_precision with layout=tdg_ex: only rl-games' own agent"),
    (["train.torch_compile=true"], "invalid train.torch_compile with layout=tdg_ex"),
    (["train.save_frequency=5"], "invalid train.save_frequency with layout=tdg_ex"),
    (["train.check_sync=true", "layout=decoupled_async"], "invalid train.check_sync with layout=decoupled_async"),
    (["train.use_smooth_clamp=true"], "invalid train.use_smooth_clamp with layout=tdg_ex"),
]


@pytest.mark.parametrize(("overrides", "expected"), CASES)
def test_unapplied_train_setting_exits_2_and_launches_nothing(overrides: list[str], expected: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = run(compose_config(*EXPERIENCE, *overrides), tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in err
    assert not (tmp_path / "gmis").exists()


def test_every_schedule_and_the_defaults_plan() -> None:
    for schedule in ("adaptive", "linear", "identity"):
        cfg = compose_config(*EXPERIENCE, f"train.lr_schedule={schedule}", "train.kl_threshold=0.01")
        assert refused(cfg.train) == []
    assert {"mixed_precision", "torch_compile"} <= set(RLGAMES_ONLY)


RNN = "++task.rnn={name: gru, units: 8, layers: 1}"
CNN = "++task.cnn={type: conv2d, activation: relu, permute_input: false, convs: [{filters: 4, kernel_size: 3, " \
      "strides: 2, padding: 0}]}"
POLICY_CASES = [
    (["layout=tdg", "gmis_per_gpu=2", CNN],
     "invalid layout=tdg for a cnn policy (task.cnn): its state ring carries each environment's observation as one "
     "flat float32 row; layouts that run it: tcg, tcg_ex, tdg_ex, decoupled_async"),
    (["layout=decoupled_async", "num_gpus=2", RNN, "train.horizon_length=9", "async_train.replay_ratio=1"],
     "invalid async_train.replay_ratio=1 with a recurrent policy (task.rnn) and layout=decoupled_async"),
    ([RNN, "train.horizon_length=8", "train.seq_length=4"],
     "invalid train.horizon_length=8 with a recurrent policy (task.rnn) and layout=tdg_ex: the 7 trained steps of "
     "a rollout (the last one bootstraps) must be whole sequences of train.seq_length=4; valid: k x 4 + 1, e.g. 5,"),
    ([RNN, "train.horizon_length=9", "train.device=lazy"],
     "invalid train.device: 'lazy'; valid: auto, cpu, cuda. a recurrent policy (task.rnn) cannot run on the lazy "
     "stand-in: PyTorch's lazy backend has no LSTM/GRU kernel"),
]


@pytest.mark.parametrize(("overrides", "expected"), POLICY_CASES)
def test_a_policy_kind_a_layout_cannot_run_exits_2_naming_the_layouts_that_can(
        overrides: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(compose_config(*EXPERIENCE, *overrides), tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in err
    assert not (tmp_path / "gmis").exists()


@pytest.mark.parametrize("layout", ["tdg_ex", "decoupled_async", "tcg", "tdg"])
def test_rnn_and_cnn_policies_plan_where_they_run(layout: str, tmp_path: Path) -> None:
    gpus = ["num_gpus=2"] if layout == "decoupled_async" else ["gmis_per_gpu=2"] if layout == "tdg" else []
    kinds = [RNN] if layout == "tdg" else [RNN, CNN]
    cfg = compose_config(*EXPERIENCE, f"layout={layout}", *gpus, *kinds, "train.horizon_length=9", "mode=plan")
    assert run(cfg, tmp_path) == 0
