"""IsaacGymEnvs' habits: test=True, headless, seed=-1, capture_video, and a misspelt key's hint."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config, run_cli

from gmiexp.app import run
from gmiexp.config.cli_keys import check_overrides
from gmiexp.config.enums import Mode
from gmiexp.errors import ConfigError
from gmiexp.planner.build import build_plan


def test_test_true_is_eval_and_headless_is_accepted(capsys: pytest.CaptureFixture) -> None:
    cfg = compose_config("test=True", "headless=True")
    assert cfg.mode == Mode.eval
    assert "headless" not in capsys.readouterr().err
    compose_config("headless=False")
    assert capsys.readouterr().err.count("headless=False changes nothing") == 1


def test_seed_minus_one_draws_a_seed_recorded_in_the_plan(tmp_path: Path) -> None:
    seeds = {compose_config("seed=-1").seed for _ in range(3)}
    assert all(0 <= s < 2**31 for s in seeds) and len(seeds) > 1
    cfg = compose_config("seed=-1", "mode=plan", "task=Cartpole")
    plan, _ = build_plan(cfg, tmp_path)
    assert plan.seed == cfg.seed >= 0
    with pytest.raises(ConfigError, match="seed=-1 with launch.nnodes"):
        compose_config("seed=-1", "launch.nnodes=2")


@pytest.mark.parametrize("arg", ["task=Ant", "train.gamma=0.9", "backend.sm_percent=50", "hydra.run.dir=x",
                                 "hydra/launcher=basic", "+foo=1", "extra.anything=1", "-m", "seed=1,2,3",
                                 "launch.heartbeat_timeout_s=5", "eval.video=true", "capture_video=True"])
def test_known_keys_pass(arg: str) -> None:
    check_overrides([arg])


@pytest.mark.parametrize(("arg", "mean"), [("headlss=True", "headless"), ("train.gama=0.9", "train.gamma"),
                                           ("backend.sm_percnt=5", "backend.sm_percent")])
def test_misspelt_key_names_the_valid_ones(arg: str, mean: str) -> None:
    with pytest.raises(ConfigError, match=f"did you mean {mean}") as e:
        check_overrides([arg])
    assert "valid:" in str(e.value) and "+" not in str(e.value)


def test_cli_misspelt_key_exits_2_without_a_plus_hint() -> None:
    r = run_cli("mode=plan", "headlss=True")
    assert r.returncode == 2
    assert "did you mean headless" in r.stderr and "+headlss" not in r.stderr


@pytest.mark.parametrize("args", [("task=Cartpole",), ("task=Ant", "layout=tdg_ex", "gmis_per_gpu=3")])
def test_capture_video_where_nothing_films_exits_2_saying_why(tmp_path: Path, args: tuple[str, ...],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # the job in this process (a launch costs 3-4 s of CPU, and this check imports rl-games: 4 s more): a refusal
    # read from stderr; the CLI's exit 2 for a ConfigError of a job is launched by
    # tests/test_cli_errors.py::test_cli_value_error_exits_2
    capsys.readouterr()
    code = run(compose_config(*args, "capture_video=True", "num_gpus=1"), tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert "invalid capture_video=True" in err
    assert not (tmp_path / "gmis").exists()  # nothing launched


@pytest.mark.slow
def test_capture_video_films_every_n_epochs(tmp_path: Path) -> None:
    r = run_cli("task=Ant", "num_gpus=1", "gmis_per_gpu=1", "num_envs=8", "train.horizon_length=8",
                "train.minibatch_size=64", "max_iterations=4", "capture_video=True", "capture_video_freq=2",
                "eval.video_steps=20", "launch.progress=false", f"hydra.run.dir={tmp_path}", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    import imageio.v2 as imageio

    videos = sorted(p.name for p in (tmp_path / "videos").glob("*.mp4"))
    assert videos == ["epoch_2.mp4", "epoch_4.mp4"]
    assert imageio.get_reader(tmp_path / "videos" / "epoch_2.mp4").count_frames() >= 2
