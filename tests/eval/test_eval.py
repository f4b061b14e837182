"""mode=eval: a trained checkpoint plays its own task, wrong checkpoints exit 2, eval.video writes an mp4."""

from __future__ import annotations

import ctypes.util
import dataclasses
import json
import math
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gmitest import FAST, compose_config, run_cli

from gmiexp.config import TaskConfig
from gmiexp.envs.vecenv import GMIVecEnv
from gmiexp.envs.video import open_filmer
from gmiexp.errors import ConfigError
from gmiexp.eval import run_eval
from gmiexp.eval.episodes import play
from gmiexp.rl.rlgames.record import RECORD

ANT_SMALL = ["task=Ant", "num_envs=8", "max_iterations=3", "gmis_per_gpu=1", "launch.progress=false",
             "train.horizon_length=16", "train.minibatch_size=128", "train.mini_epochs=2"]


def train(run_dir: Path, *overrides: str) -> Path:
    r = run_cli(*overrides, f"hydra.run.dir={run_dir}", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    nn = run_dir / "rl_games" / "run" / "nn"
    return next(nn.glob("last_*.pth"))


@pytest.fixture(scope="module")
def ant_checkpoint(tmp_path_factory) -> Path:
    return train(tmp_path_factory.mktemp("ant"), *ANT_SMALL)


@pytest.fixture(scope="module")
def cartpole_checkpoint(tmp_path_factory) -> Path:
    # launch.inprocess: the one GMI trains in the launcher's process (no fork server: measured 9.2 s of CPU against
    # 12.1); the checkpoint and its record are the same
    return train(tmp_path_factory.mktemp("cartpole"), *FAST, "max_iterations=1", "gmis_per_gpu=1",
                 "launch.inprocess=true")


@pytest.mark.timeout(900)  # a short training run (fixture) and an eval; slow on a loaded host
def test_ant_trained_3_epochs_evaluates_to_a_finite_mean_return_over_3_episodes_and_films_one(ant_checkpoint,
                                                                                             tmp_path):
    """One evaluation: 3 episodes' returns, and a playable mp4 of the first one's first steps (one launch, not two)."""
    import imageio.v2 as imageio

    assert (ant_checkpoint.parent / RECORD).is_file()  # training recorded the task and network
    r = run_cli("mode=eval", f"checkpoint={ant_checkpoint}", "eval.episodes=3", "eval.video=true",
                "eval.video_steps=25", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("\n") == 1 and r.stdout.startswith("gmiexp eval ok: task=Ant episodes=3")
    assert "video=" in r.stdout  # stdout: the summary line only
    s = json.loads((tmp_path / "summary.json").read_text())
    m = s["metrics"]
    assert len(s["returns"]) == 3 and all(1 <= n <= 1000 for n in s["lengths"])
    assert math.isfinite(m["eval/return_mean"]) and math.isfinite(m["eval/return_std"])
    assert m["eval/return_mean"] == pytest.approx(float(np.mean(s["returns"])))
    assert m["eval/length_mean"] == pytest.approx(float(np.mean(s["lengths"])))
    assert s["video"] == str(tmp_path / "eval.mp4") and 2 <= s["video_frames"] <= 26  # reset frame + <= 25 steps
    reader = imageio.get_reader(tmp_path / "eval.mp4")
    assert reader.count_frames() == s["video_frames"]
    assert reader.get_data(0).shape == (240, 320, 3)


def test_a_cartpole_checkpoint_evaluated_as_ant_exits_2_naming_both_tasks(cartpole_checkpoint, tmp_path, capsys):
    """The eval in this process (a launch costs 3-4 s of CPU), given the task the CLI passes for ``task=Ant``
    (gmiexp.eval.task.requested_task). mode=eval's exit 2 through the CLI on this refusal (one line, no traceback,
    nothing on stdout): tests/rl/rlgames/test_fit.py::test_eval_of_another_tasks_checkpoint_exits_2_naming_both_sizes.
    """
    cfg = compose_config("mode=eval", f"checkpoint={cartpole_checkpoint}", "task=Ant")
    capsys.readouterr()
    with pytest.raises(ConfigError) as e:
        run_eval(cfg, tmp_path, asked=dataclasses.asdict(cfg.task))
    line = str(e.value).splitlines()[0]  # one line, sizes and tasks of both
    assert capsys.readouterr().out == ""
    assert "its policy has task Cartpole, 4 observations, 2 actions" in line
    assert "this run's has task Ant, 27 observations, 8 actions" in line
    assert not (tmp_path / "summary.json").exists()


def test_weights_that_do_not_fit_the_recorded_network_exit_2_naming_their_sizes(
        ant_checkpoint, cartpole_checkpoint, tmp_path):
    shutil.copy(ant_checkpoint.parent / RECORD, tmp_path / RECORD)  # says Ant ...
    shutil.copy(cartpole_checkpoint, tmp_path / "policy.pth")  # ... holds Cartpole's weights
    cfg = compose_config("mode=eval", f"checkpoint={tmp_path / 'policy.pth'}", "eval.episodes=1")
    with pytest.raises(ConfigError, match=r"its policy has task Ant, 4 observations, 2 actions.*this run's has "
                       r"task Ant, 27 observations, 8 actions"):
        run_eval(cfg, tmp_path)


@pytest.mark.timeout(600)
def test_a_checkpoint_from_elsewhere_plays_the_task_the_command_line_names(ant_checkpoint, tmp_path):
    alone = tmp_path / "alone" / "x.pth"  # e.g. trained by vanilla rl-games: no record beside it
    alone.parent.mkdir()
    shutil.copy(ant_checkpoint, alone)
    cfg = compose_config("mode=eval", f"checkpoint={alone}", "task=Ant", "eval.episodes=1")
    s = run_eval(cfg, tmp_path, asked=dataclasses.asdict(cfg.task))
    assert s["task"] == "Ant" and len(s["returns"]) == 1 and math.isfinite(s["metrics"]["eval/return_mean"])


def test_a_checkpoint_without_its_record_or_not_a_checkpoint_exits_2(ant_checkpoint, tmp_path):
    alone = tmp_path / "alone" / "x.pth"
    alone.parent.mkdir()
    shutil.copy(ant_checkpoint, alone)
    with pytest.raises(ConfigError, match=f"no {RECORD} beside it"):
        run_eval(compose_config("mode=eval", f"checkpoint={alone}"), tmp_path)
    junk = tmp_path / "junk" / "x.pth"
    junk.parent.mkdir()
    junk.write_text("not a checkpoint")
    shutil.copy(ant_checkpoint.parent / RECORD, junk.parent / RECORD)
    with pytest.raises(ConfigError, match="not a readable rl-games checkpoint"):
        run_eval(compose_config("mode=eval", f"checkpoint={junk}"), tmp_path)


def has_renderer() -> bool:
    """MuJoCo's EGL back-end needs the GL dispatch library and Mesa's EGL; OSMesa is the other back-end."""
    egl = ctypes.util.find_library("EGL") and ctypes.util.find_library("EGL_mesa")
    return bool(egl or ctypes.util.find_library("OSMesa"))


@pytest.mark.skipif(not has_renderer(), reason="no offscreen GL renderer (Mesa's libEGL or libOSMesa): "
                    "apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri (make renderer, run by .ci/run)")
def test_video_is_refused_before_anything_runs_where_the_simulator_cannot_render():
    task = TaskConfig(name="Cartpole", simulator="torch", env_id="Cartpole", max_episode_length=200, continuous=False)
    with pytest.raises(ConfigError, match="invalid eval.video=true for task Cartpole.*cannot render"):
        open_filmer(task, (4,), 320, 240, 10)


@pytest.mark.parametrize("bad", ["eval.episodes=0", "eval.video_steps=0", "checkpoint="])
def test_bad_eval_settings_exit_2(bad, tmp_path):
    with pytest.raises(ConfigError, match=bad.split("=")[0].split(".")[-1]):
        run_eval(compose_config("mode=eval", "checkpoint=/x.pth", bad), tmp_path)


class Staggered(GMIVecEnv):
    """Env i ends its episodes every i+1 steps with reward i+1 per step; auto-resets like envpool."""

    def __init__(self, n: int) -> None:
        super().__init__(n, gym.spaces.Box(-1, 1, (1,)), gym.spaces.Box(-1, 1, (1,)))
        self.t = torch.zeros(n, dtype=torch.int64)

    def reset(self) -> torch.Tensor:
        return torch.zeros(self.num_envs, 1)

    def _step(self, actions):
        self.t += 1
        period = torch.arange(1, self.num_envs + 1)
        done = self.t % period == 0
        return torch.zeros(self.num_envs, 1), period.float(), done, {}


def test_play_counts_each_environments_first_episode_only():
    eps = play(Staggered(3), lambda obs: torch.zeros(obs.shape[0], 1), max_steps=100)
    assert eps.lengths == [1, 2, 3] and eps.returns == [1.0, 4.0, 9.0]
    m = eps.metrics()
    assert m["eval/return_mean"] == pytest.approx(14 / 3) and m["eval/length_mean"] == 2.0
    assert m["eval/return_std"] == pytest.approx(float(np.std([1.0, 4.0, 9.0])))


@pytest.mark.timeout(600)  # one short training run and an eval; slow on a loaded host
@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_a_recurrent_gymnasium_policy_evaluates_and_films_itself(tmp_path):
    """A new family end to end: Gymnasium's CartPole (pygame renders it, no GL needed), an LSTM policy."""
    import imageio.v2 as imageio

    ckpt = train(tmp_path / "train", "task=CartPoleGym", "+task.rnn={name:lstm,units:8,layers:1}", "num_envs=8",
                 "max_iterations=1", "gmis_per_gpu=1", "launch.progress=false", "train.horizon_length=8",
                 "train.minibatch_size=32", "train.mini_epochs=1")
    r = run_cli("mode=eval", f"checkpoint={ckpt}", "eval.episodes=2", "eval.video=true", "eval.video_steps=12",
                f"hydra.run.dir={tmp_path / 'eval'}")
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert s["task"] == "CartPoleGym" and len(s["returns"]) == 2
    assert all(math.isfinite(x) and 1 <= n <= 500 for x, n in zip(s["returns"], s["lengths"], strict=True))
    assert 2 <= s["video_frames"] <= 13
    assert imageio.get_reader(tmp_path / "eval" / "eval.mp4").count_frames() == s["video_frames"]


@pytest.mark.parametrize(("env_id", "continuous"), [("Pong-v5", False), ("WalkerWalk-v1", True)])
def test_video_of_an_envpool_family_without_a_gymnasium_twin_is_refused(env_id: str, continuous: bool) -> None:
    task = TaskConfig(name="T", simulator="envpool", env_id=env_id, continuous=continuous)
    with pytest.raises(ConfigError, match=f"invalid eval.video=true for task T \\(envpool {env_id}\\): this envpool "
                                          "family \\(Atari, dm_control, Box2D\\) cannot render"):
        open_filmer(task, (4, 84, 84), 320, 240, 10)


@pytest.mark.skipif(not has_renderer(), reason="no offscreen GL renderer (make renderer)")
@pytest.mark.slow  # mjlab's import and MuJoCo Warp on the CPU, three times: a minute or two
@pytest.mark.timeout(900)
def test_an_rl_games_policy_of_an_mjlab_task_films_while_training_and_in_eval(tmp_path):
    """mjlab renders its own tasks: capture_video during rl-games' training, and mode=eval eval.video=true."""
    pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")
    import imageio.v2 as imageio

    ckpt = train(tmp_path / "train", "task=MjlabCartpole", "num_envs=8", "max_iterations=2", "gmis_per_gpu=1",
                 "launch.progress=false", "train.horizon_length=8", "train.minibatch_size=64", "train.mini_epochs=1",
                 "capture_video=true", "capture_video_freq=2", "eval.video_steps=12")
    video = tmp_path / "train" / "videos" / "epoch_2.mp4"
    reader = imageio.get_reader(video)
    assert reader.count_frames() == 12 and reader.get_data(0).shape == (240, 320, 3)  # eval.video_steps, its size
    r = run_cli("mode=eval", f"checkpoint={ckpt}", "eval.episodes=2", "eval.video=true", "eval.video_steps=10",
                "eval.video_width=160", "eval.video_height=128", f"hydra.run.dir={tmp_path / 'eval'}", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert s["task"] == "MjlabCartpole" and len(s["returns"]) == 2 and all(math.isfinite(x) for x in s["returns"])
    reader = imageio.get_reader(tmp_path / "eval" / "eval.mp4")
    assert 2 <= s["video_frames"] <= 10 and reader.count_frames() == s["video_frames"]
    assert reader.get_data(0).shape == (128, 160, 3)
