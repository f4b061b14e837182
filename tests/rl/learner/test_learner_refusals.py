"""What the learner does not apply exits 2 at plan time with an experience layout; nothing is launched."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config

from gmiexp.app import run
from gmiexp.config.support import refused

EXPERIENCE = ["layout=tdg_ex", "task=Cartpole", "gmis_per_gpu=1", "num_envs=8", "max_iterations=1"]

LEARNER = ["layout=decoupled_async", "num_gpus=2"]  # trains with gmiexp's learner
CASES = [
    ([*LEARNER, "++train.rlgames_config.schedule_entropy=true",
      "++train.rlgames_config.save_best_after=50", "++train.rlgames_config.zero_rnn_on_done=true"],
     "invalid train.rlgames_config.schedule_entropy with layout=decoupled_async: "
     "train.rlgames_config.schedule_entropy (the learner keeps train.entropy_coef; rl-games' agent (tcg_ex, or "
     "tdg_ex with one trainer and no replay) applies it); drop them"),
    ([*LEARNER, "++train.rlgames_config.normalize_rms_advantage=true"],
     "normalize_rms_advantage only False (rl-games 1.6.5 cannot build it"),
    (["async_train.replay_ratio=1", "++train.rlgames_config.zero_rnn_on_done=false"],
     "invalid train.rlgames_config.zero_rnn_on_done with layout=tdg_ex: train.rlgames_config.zero_rnn_on_done (the "
     "learner always restarts a finished episode's recurrent states inside its sequences; rl-games' agent (tcg_ex, "
     "or tdg_ex with one trainer and no replay) applies it)"),
]


@pytest.mark.parametrize(("overrides", "expected"), CASES)
def test_unapplied_train_setting_exits_2_and_launches_nothing(overrides: list[str], expected: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = run(compose_config(*EXPERIENCE, *overrides), tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in err
    assert not (tmp_path / "gmis").exists()


@pytest.mark.parametrize("layout", [[], LEARNER])
@pytest.mark.parametrize("setting", ["train.bound_loss_type=regularisation", "train.use_smooth_clamp=true",
                                     "train.mixed_precision=true", "train.torch_compile=true",
                                     "train.save_frequency=5", "train.check_sync=true", "train.score_to_win=100",
                                     "++train.rlgames_config.schedule_type=standard",
                                     "++train.rlgames_config.epochs_between_resets=5", "train.value_bootstrap=false",
                                     "++train.rlgames_config.save_best_after=50",
                                     "++train.rlgames_config.weight_decay=0.1"])
def test_the_experience_trainers_apply_rl_games_keys(setting: str, layout: list[str], tmp_path: Path) -> None:
    """rl-games' agent (one tdg_ex trainer) and the learner (decoupled_async) apply them: the plan is made."""
    cfg = compose_config(*EXPERIENCE, *layout, setting, "mode=plan")
    assert run(cfg, tmp_path) == 0


def test_tdg_ex_with_one_trainer_takes_every_key_rl_games_agent_reads(tmp_path: Path) -> None:
    cfg = compose_config(*EXPERIENCE, "++train.rlgames_config.weight_decay=0.1",
                         "++train.rlgames_config.zero_rnn_on_done=false", "mode=plan")
    assert run(cfg, tmp_path) == 0


def test_every_schedule_and_the_defaults_plan() -> None:
    for schedule in ("adaptive", "linear", "identity"):
        cfg = compose_config(*EXPERIENCE, f"train.lr_schedule={schedule}", "train.kl_threshold=0.01")
        assert refused(cfg.train) == {}
    assert refused(cfg.train, rlgames_agent=True) == {}


RNN = "++task.rnn={name: gru, units: 8, layers: 1}"
CNN = "++task.cnn={type: conv2d, activation: relu, permute_input: false, convs: [{filters: 4, kernel_size: 3, " \
      "strides: 2, padding: 0}]}"
POLICY_CASES = [
    (["layout=tdg", "gmis_per_gpu=2", CNN],
     "invalid layout=tdg for a cnn policy (task.cnn): its state ring carries each environment's observation as one "
     "flat float32 row; layouts that run it: tcg, tcg_ex, tdg_ex, decoupled_async"),
    (["layout=decoupled_async", "num_gpus=2", RNN, "train.horizon_length=8", "async_train.replay_ratio=1"],
     "invalid async_train.replay_ratio=1 with a recurrent policy (task.rnn) and layout=decoupled_async"),
    ([RNN, "train.horizon_length=9", "train.seq_length=4"],
     "invalid train.horizon_length=9 with a recurrent policy (task.rnn) and layout=tdg_ex: the 9 trained steps of "
     "a rollout must be whole sequences of train.seq_length=4 (as rl-games asks); valid: k x 4, e.g. 4, 8, 16"),
    ([RNN, "train.horizon_length=8", "train.device=lazy"],
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
    cfg = compose_config(*EXPERIENCE, f"layout={layout}", *gpus, *kinds, "train.horizon_length=8", "mode=plan")
    assert run(cfg, tmp_path) == 0
