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
