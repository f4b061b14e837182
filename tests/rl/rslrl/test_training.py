"""train=rslrl end to end in tcg_ex on the CPU: mjlab's Cartpole and Go1 recipes with 2 GMIs, the lazy stand-in
device, a VecEnv of the tests' own through ``task.vec_env``, resuming, and Ctrl-C keeping a checkpoint mjlab reads."""

from __future__ import annotations

import json
import signal
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from gmitest import popen_cli, run_cli

pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")

FAST = ["train=rslrl", "gmis_per_gpu=2", "launch.progress=false", "train.check_sync=true"]


def history(run_dir: Path, gmi: int) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "gmis" / str(gmi) / "history.jsonl").read_text().splitlines() if x]


def check_trained(run_dir: Path, iterations: int, frames_per_iteration: int) -> None:
    """Both GMIs held the same model after every iteration; frames are the group's, counted once."""
    a, b = history(run_dir, 0), history(run_dir, 1)
    assert [r["iteration"] for r in a] == list(range(1, iterations + 1))
    assert [r["sync/digest"] for r in a] == [r["sync/digest"] for r in b]
    assert len({r["sync/digest"] for r in a}) == iterations  # the model changed every iteration
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "ok" and s["config"]["role"] == "rslrl"
    assert s["metrics"]["frames"] == iterations * frames_per_iteration
    assert (run_dir / "rsl_rl" / f"model_{iterations - 1}.pt").is_file()


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("task", "envs", "steps", "device"), [
    # slow: the default suite keeps mjlab's registered Cartpole recipe with 2 GMIs on the CPU device (the Ctrl-C
    # test below) and 2 GMIs of mjlab's Cartpole on lazy (the Isaac Lab agent file's test below)
    pytest.param("Mjlab-Cartpole-Balance", 8, 32, "lazy", marks=pytest.mark.slow),
    # slow: the same recipe path as Cartpole's (~90 s more for Go1's model on 2 cores)
    pytest.param("Mjlab-Velocity-Flat-Unitree-Go1", 4, 24, "cpu", marks=pytest.mark.slow),
], ids=["cartpole-lazy", "go1"])
def test_mjlab_recipes_train_with_two_gmis(task: str, envs: int, steps: int, device: str, tmp_path: Path) -> None:
    r = run_cli(*FAST, f"task={task}", f"batch.total_envs={envs}", "max_iterations=2", f"train.device={device}",
                "launch.heartbeat_timeout_s=300", f"hydra.run.dir={tmp_path}", timeout=560)
    assert r.returncode == 0, r.stderr[-3000:]
    check_trained(tmp_path, 2, envs * steps)


@pytest.mark.timeout(600)
def test_an_isaac_lab_agent_yaml_as_written_trains_two_gmis_of_an_mjlab_task(tmp_path: Path) -> None:
    """Isaac Lab 3.0's params/agent.yaml of Franka lift (device: cuda:0, MISSING fields as {}) on this CPU host,
    its models on the lazy stand-in device (not the host's) while mjlab's simulation steps on the CPU."""
    f = Path(__file__).parent / "fixtures" / "isaaclab3_franka_lift.yaml"
    assert "device: cuda:0" in f.read_text()
    r = run_cli(*FAST, "task=Mjlab-Cartpole-Balance", f"train.file={f}", "batch.total_envs=8", "max_iterations=2",
                "train.device=lazy", "launch.heartbeat_timeout_s=300", f"hydra.run.dir={tmp_path}", timeout=560)
    assert r.returncode == 0, r.stderr[-3000:]
    check_trained(tmp_path, 2, 8 * 24)  # the file's num_steps_per_env
    said = [ln for p in (tmp_path / "logs").rglob("*") if p.is_file() for ln in p.read_text(errors="replace")
            .splitlines() if "trained on device 'cuda:0'" in ln] + [
        ln for ln in r.stderr.splitlines() if "trained on device 'cuda:0'" in ln]
    assert said and all("GMI 0 on 'lazy'" in ln for ln in said)


def test_a_vec_env_of_our_own_trains_resumes_and_requeues_with_frames_continued(tmp_path: Path) -> None:
    """The seam Isaac Lab users come through: ``task.vec_env=<module>:<function>`` returning an rsl_rl VecEnv.

    Its episode log is recorded (``train.info_key``): each iteration's mean over both GMIs, in each one's rows.
    """
    common = [*FAST, "task=Cartpole", "task.vec_env=rslrl_vecenv:make", "batch.total_envs=8",
              "+train.rslrl.num_steps_per_env=8", "+train.rslrl.actor.obs_normalization=true",
              "+train.rslrl.critic.obs_normalization=true", "train.info_key=log.Episode/final_distance"]
    r = run_cli(*common, "max_iterations=2", f"hydra.run.dir={tmp_path / 'a'}", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    check_trained(tmp_path / "a", 2, 64)
    logged = [[x["info/log.Episode/final_distance"] for x in history(tmp_path / "a", g)] for g in (0, 1)]
    assert logged[0] == logged[1] and all(v is not None and 0 < v <= 2 for v in logged[0]), logged
    assert logged[0][0] != logged[0][1]  # episodes end in both iterations (the runner starts them at random lengths)
    ckpt = tmp_path / "a" / "rsl_rl" / "model_1.pt"
    r = run_cli(*common, "max_iterations=4", f"checkpoint={ckpt}", f"hydra.run.dir={tmp_path / 'b'}", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = history(tmp_path / "b", 0)
    assert [(x["iteration"], x["frames"], x["frames0"]) for x in rows] == [(3, 192, 128), (4, 256, 128)]
    assert [x["sync/digest"] for x in rows] == [x["sync/digest"] for x in history(tmp_path / "b", 1)]
    # a requeued job (the same command in the same run dir, launch.resume=auto) goes on from its own checkpoint
    r = run_cli(*common, "max_iterations=3", f"hydra.run.dir={tmp_path / 'a'}", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert [(x["iteration"], x["frames"], x["frames0"]) for x in history(tmp_path / "a", 0)] == [(3, 192, 128)]


def test_ctrl_c_keeps_a_checkpoint_mjlab_s_loader_reads(tmp_path: Path, no_orphans: None) -> None:
    """mjlab's Cartpole recipe, 2 GMIs on the CPU, stopped after its second iteration: both GMIs in step."""
    p = popen_cli(*FAST, "task=Mjlab-Cartpole-Balance", "batch.total_envs=8", "max_iterations=10000",
                  f"hydra.run.dir={tmp_path}")
    try:
        deadline = time.time() + 300
        hist = tmp_path / "gmis" / "0" / "history.jsonl"
        while time.time() < deadline and not (hist.is_file() and hist.read_text().count("\n") >= 2):
            time.sleep(0.5)
        assert hist.is_file(), "no iteration finished"
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err[-3000:]
    rows = history(tmp_path, 0)
    assert [r["sync/digest"] for r in rows] == [r["sync/digest"] for r in history(tmp_path, 1)]
    assert [r["frames"] for r in rows] == [256 * (i + 1) for i in range(len(rows))]  # 8 envs x 32 steps
    ckpts = sorted((tmp_path / "rsl_rl").glob("model_*.pt"), key=lambda f: int(f.stem.split("_")[1]))
    last = int(ckpts[-1].stem.split("_")[1])
    assert last + 1 == len(rows) < 10000  # the iterations trained until the stop, kept

    import mjlab.tasks  # noqa: F401
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.rl import MjlabOnPolicyRunner, RslRlVecEnvWrapper
    from mjlab.tasks.registry import load_env_cfg, load_rl_cfg

    cfg = load_env_cfg("Mjlab-Cartpole-Balance")
    cfg.scene.num_envs = 2
    env = RslRlVecEnvWrapper(ManagerBasedRlEnv(cfg=cfg, device="cpu"))
    runner = MjlabOnPolicyRunner(env, asdict(load_rl_cfg("Mjlab-Cartpole-Balance")), None, "cpu")
    runner.load(str(ckpts[-1]))  # mjlab's loader, strict: every key of mjlab's models present and matching
    saved = torch.load(ckpts[-1], weights_only=False)
    assert saved["iter"] == last and runner.current_learning_iteration == last
    assert all(torch.equal(v, saved["actor_state_dict"][k]) for k, v in runner.alg.actor.state_dict().items())
    env.close()


@pytest.mark.slow
def test_a_requested_reshape_goes_on_from_the_iteration_it_stopped_at(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    """1 -> 2 GMIs mid-run at the same global batch: every iteration once, frames counted once, in order."""
    from gmiexp.tools import reshape as tool

    run_dir, iters = tmp_path / "run", 30
    p = popen_cli("train=rslrl", "task=Cartpole", "task.vec_env=rslrl_vecenv:make", "gmis_per_gpu=1",
                  "batch.total_envs=8", "+train.rslrl.num_steps_per_env=8", f"max_iterations={iters}",
                  "launch.reshape=request", "launch.progress=false", f"hydra.run.dir={run_dir}")
    try:
        deadline = time.time() + 240
        hist = run_dir / "gmis" / "0" / "history.jsonl"
        while time.time() < deadline and not (hist.is_file() and hist.read_text().count("\n") >= 3):
            time.sleep(0.2)
        assert tool.main([str(run_dir), "gmis_per_gpu=2"]) == 0
        assert "gmis_per_gpu 1 -> 2" in capsys.readouterr().out
        _out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err[-3000:]
    s = json.loads((run_dir / "summary.json").read_text())
    (rec,) = s["reshapes"]
    assert (rec["from"], rec["to"], rec["status"]) == (1, 2, "done")
    assert [r["iteration"] for r in s["history"]] == list(range(1, iters + 1))
    assert [r["frames"] for r in s["history"]] == [64 * i for i in range(1, iters + 1)]
