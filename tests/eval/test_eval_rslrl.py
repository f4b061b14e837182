"""mode=eval of rsl_rl checkpoints: a train=rslrl run's model_<it>.pt plays its task as the checkpoint's own actor does,
one trained elsewhere plays with the config saved beside it, another task's exits 2 naming both sizes."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own alias
import yaml
from gmitest import compose_config, run_cli
from rslrl_vecenv import PointMass

from gmiexp.config import TaskConfig
from gmiexp.errors import ConfigError
from gmiexp.eval import run_eval
from gmiexp.eval.rslrl import check_video
from gmiexp.rl.rlgames.record import RECORD
from gmiexp.rl.rslrl.checkpoint import AGENT_YAML

POINT = ["train=rslrl", "task=Cartpole", "task.vec_env=rslrl_vecenv:make", "+train.rslrl.num_steps_per_env=8"]
EPISODE = 16  # PointMass's episodes (tests/helpers/rslrl_vecenv.py)


@pytest.fixture(scope="module")
def point_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A train=rslrl run of the tests' own VecEnv: 2 iterations, 1 GMI (rsl_rl checkpoints model_0.pt, model_1.pt)."""
    run_dir = tmp_path_factory.mktemp("point")
    # launch.inprocess: the one GMI trains in the launcher's process (no fork server, seconds of CPU less); these
    # tests are about the checkpoint it writes, not about GMI processes
    r = run_cli(*POINT, "batch.total_envs=4", "gmis_per_gpu=1", "max_iterations=2", "launch.progress=false",
                "launch.inprocess=true", f"hydra.run.dir={run_dir}", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return run_dir / "rsl_rl" / "model_1.pt"


def by_hand(ckpt: Path, episodes: int, seed: int) -> list[float]:
    """The checkpoint's actor played without rsl_rl: its MLP's layers (ELU between them), the Gaussian's mean."""
    actor = torch.load(ckpt, map_location="cpu", weights_only=False)["actor_state_dict"]
    layers = sorted({int(k.split(".")[1]) for k in actor if k.startswith("mlp.")})
    env, returns = PointMass(episodes, "cpu", seed), torch.zeros(episodes, dtype=torch.float64)
    obs = env.get_observations()["policy"]
    for _ in range(EPISODE):
        x = obs
        for i, n in enumerate(layers):
            x = F.linear(x, actor[f"mlp.{n}.weight"], actor[f"mlp.{n}.bias"])
            x = F.elu(x) if i < len(layers) - 1 else x
        td, reward, _done, _ = env.step(x)
        obs = td["policy"]
        returns += reward.double()
    return returns.tolist()


@pytest.mark.timeout(900)  # a short training run (fixture) and an eval in a subprocess; slow on a loaded host
def test_a_train_rslrl_checkpoint_plays_its_task_as_its_own_actor_does(point_run: Path, tmp_path: Path) -> None:
    assert (point_run.parent / RECORD).is_file()  # training recorded the task and runner config
    r = run_cli("mode=eval", f"checkpoint={point_run}", "eval.episodes=3", "seed=5", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("\n") == 1 and r.stdout.startswith("gmiexp eval ok: task=Cartpole episodes=3"), r.stdout
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["lengths"] == [EPISODE] * 3
    assert s["returns"] == pytest.approx(by_hand(point_run, 3, seed=5), rel=1e-5)
    m = s["metrics"]
    assert m["eval/return_mean"] == pytest.approx(sum(s["returns"]) / 3) and m["eval/length_mean"] == EPISODE


def test_another_tasks_checkpoint_exits_2_naming_both_sizes_before_anything_is_built(point_run: Path,
                                                                                    tmp_path: Path) -> None:
    pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (an mjlab task id)")
    cfg = compose_config("mode=eval", f"checkpoint={point_run}", "task=Mjlab-Cartpole-Balance")
    with pytest.raises(ConfigError, match=r"its policy has task Cartpole, 2 observations, 1 actions.*this run's has "
                                          r"task Mjlab-Cartpole-Balance, 5 observations, 1 actions"):
        run_eval(cfg, tmp_path, asked=dataclasses.asdict(cfg.task))
    assert not (tmp_path / "summary.json").exists()


def elsewhere(point_run: Path, root: Path) -> Path:
    """The checkpoint as mjlab's and Isaac Lab's scripts leave theirs: no gmiexp record, params/agent.yaml beside."""
    ckpt = root / "model_1.pt"
    (root / AGENT_YAML).parent.mkdir(parents=True)
    shutil.copy(point_run, ckpt)
    params = yaml.safe_load((point_run.parent / RECORD).read_text())["params"]
    (root / AGENT_YAML).write_text(yaml.safe_dump(params))
    return ckpt


def test_a_checkpoint_from_elsewhere_plays_with_the_config_saved_beside_it(point_run: Path, tmp_path: Path) -> None:
    ckpt = elsewhere(point_run, tmp_path / "logs")
    cfg = compose_config("mode=eval", f"checkpoint={ckpt}", "task=Cartpole", "task.vec_env=rslrl_vecenv:make",
                         "eval.episodes=2", "seed=5")
    s = run_eval(cfg, tmp_path, asked=dataclasses.asdict(cfg.task))
    assert s["lengths"] == [EPISODE] * 2 and s["returns"] == pytest.approx(by_hand(point_run, 2, seed=5), rel=1e-5)
    with pytest.raises(ConfigError, match="no gmiexp_policy.yaml beside it.*task=<mjlab task id>"):
        run_eval(compose_config("mode=eval", f"checkpoint={ckpt}"), tmp_path)


def test_a_network_that_does_not_fit_exits_2_naming_its_tensors(point_run: Path, tmp_path: Path) -> None:
    """A VecEnv task's sizes are known only once it is built: the built actor is checked before it is loaded."""
    ckpt = elsewhere(point_run, tmp_path / "logs")
    cfg = compose_config("mode=eval", f"checkpoint={ckpt}", "task=Cartpole", "task.vec_env=rslrl_vecenv:make",
                         "eval.episodes=1", "+train.rslrl.actor.hidden_dims=[8]")
    with pytest.raises(ConfigError, match=r"its policy has 2 observations, 1 actions, mlp \[256, 256, 256\]; this "
                                          r"run's has task Cartpole, 2 observations, 1 actions, mlp \[8\] "
                                          r"\(mlp.0.bias: checkpoint \(256,\), policy \(8,\)"):
        run_eval(cfg, tmp_path, asked=dataclasses.asdict(cfg.task))


def test_video_of_a_vec_env_task_is_refused_before_anything_is_built() -> None:
    task = TaskConfig(name="Cartpole", simulator="torch", env_id="Cartpole", vec_env="rslrl_vecenv:make")
    with pytest.raises(ConfigError, match="invalid eval.video=true for task Cartpole.*mjlab's own environments"):
        check_video(task)


def test_video_with_an_unknown_gl_back_end_is_refused_naming_the_valid_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUJOCO_GL", "wgl")
    task = TaskConfig(name="Mjlab-Cartpole-Balance", simulator="mjlab", env_id="Mjlab-Cartpole-Balance")
    with pytest.raises(ConfigError, match="invalid eval.video=true .*MUJOCO_GL='wgl' is not one of egl, osmesa, glfw"):
        check_video(task)


@pytest.mark.timeout(900)
@pytest.mark.slow  # builds mjlab's Cartpole twice on the CPU (Warp); the PointMass tests above cover the paths
def test_an_mjlab_checkpoint_from_mjlabs_own_runner_plays_and_films(tmp_path: Path) -> None:
    """mjlab's runner saves model_0.pt and mjlab's params/agent.yaml; mode=eval plays it and films environment 0."""
    pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")
    from mjlab.rl import MjlabOnPolicyRunner
    from mjlab.tasks.registry import load_rl_cfg
    from mjlab.utils.os import dump_yaml

    from gmiexp.rl.rslrl.envs import mjlab_vec_env

    task, logs = "Mjlab-Cartpole-Balance", tmp_path / "logs"
    agent = load_rl_cfg(task)
    dump_yaml(logs / AGENT_YAML, dataclasses.asdict(agent))  # as mjlab's train writes it
    runner = MjlabOnPolicyRunner(mjlab_vec_env(task, num_envs=2, device="cpu", seed=0),
                                 dataclasses.asdict(agent), str(logs), "cpu")
    runner.save(str(logs / "model_0.pt"))
    r = run_cli("mode=eval", f"checkpoint={logs / 'model_0.pt'}", f"task={task}", "eval.episodes=2",
                "capture_video=true", "eval.video_steps=10", f"hydra.run.dir={tmp_path / 'eval'}", timeout=800)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert s["task"] == task and len(s["returns"]) == 2 and all(math.isfinite(x) for x in s["returns"])
    assert all(1 <= n <= 1000 for n in s["lengths"]) and 2 <= s["video_frames"] <= 11
    import imageio.v2 as imageio

    reader = imageio.get_reader(tmp_path / "eval" / "eval.mp4")
    assert reader.count_frames() == s["video_frames"] and reader.get_data(0).shape == (240, 320, 3)
