"""A run started again in its run dir (a requeued job) resumes from its latest checkpoint; another plan is refused."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from gmitest import FAST, cli_env, compose_config, run_cli, run_here

from gmiexp.errors import ConfigError
from gmiexp.launch.requeue import epoch_of, latest_checkpoint, resume, training_key
from gmiexp.planner.build import build_plan

RUN = ["hardware=cpu", *FAST, "num_gpus=1", "train.save_frequency=1"]


def plan_of(tmp_path: Path, *overrides: str):
    return build_plan(compose_config("hardware=cpu", "task=Cartpole", "num_gpus=1", "gmis_per_gpu=2", *overrides),
                      tmp_path)[0]


def test_attempts_on_other_hosts_train_the_same_thing_and_other_plans_do_not(tmp_path: Path) -> None:
    two = ["launch.nnodes=2", "launch.node_rank=0"]
    first = plan_of(tmp_path / "a", *two, "launch.rdzv_endpoint=node001:29400", "max_iterations=10")
    again = plan_of(tmp_path / "b", *two, "launch.rdzv_endpoint=node017:41000", "launch.rdzv_id=99",
                    "max_iterations=20", "hardware.cpu_cores=3")
    assert training_key(first) == training_key(again)
    for other in (["num_envs=48"], ["seed=7"], ["train.gamma=0.9"], ["launch.nnodes=3"]):
        another = plan_of(tmp_path / "c", *two, "launch.rdzv_endpoint=node001:29400", *other)
        assert training_key(another) != training_key(first), other


def test_the_latest_checkpoint_is_the_highest_epoch_named_or_inside(tmp_path: Path) -> None:
    nn = tmp_path / "nn"
    nn.mkdir()
    for name, epoch in (("last_Cartpole_ep_3_rew_1.5.pth", 3), ("last_Cartpole_ep_12_rew_2.0.pth", 12),
                        ("Cartpole.pth", 14), ("last_Cartpole_ep_9_rew__2.5_.pth", 9)):
        torch.save({"epoch": epoch, "frame": 0}, nn / name)
    assert latest_checkpoint(nn) == (nn / "Cartpole.pth", 14)  # the best-reward file, saved at a later epoch
    (nn / "last_Cartpole_ep_15_rew_3.0.pth").write_bytes((nn / "Cartpole.pth").read_bytes()[:20])  # killed mid-write
    (nn / "Cartpole.pth").write_bytes(b"")
    assert latest_checkpoint(nn) == (nn / "last_Cartpole_ep_12_rew_2.0.pth", 12)  # the latest that loads
    assert latest_checkpoint(tmp_path / "none") is None


def test_checkpoints_without_the_plan_that_wrote_them_are_refused(tmp_path: Path) -> None:
    plan = plan_of(tmp_path)
    nn = tmp_path / "rl_games" / "run" / "nn"
    nn.mkdir(parents=True)
    torch.save({"epoch": 1}, nn / "last_Cartpole_ep_1_rew_1.0.pth")
    with pytest.raises(ConfigError, match="no plan.yaml says what trained them"):
        resume(plan, tmp_path, "auto")
    assert resume(plan, tmp_path, "never").checkpoint == ""


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_a_second_attempt_in_the_run_dir_resumes_and_another_plan_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The second attempt is a ``python -m gmiexp`` of its own, as a requeued job is: it finds the first attempt's
    checkpoints on disk only. The first attempt and the two refused ones run in this process (gmiexp.app.run, what
    the CLI runs after Hydra composed the config): a launcher's start-up each would add seconds of CPU, no check."""
    run = [*RUN, "gmis_per_gpu=1", "launch.inprocess=true"]
    r = run_here(capsys, tmp_path, *run, "max_iterations=2")
    assert r.returncode == 0, r.stderr[-3000:]
    first = summary(tmp_path)
    assert first["resumed"] is None and [h["iteration"] for h in first["history"]] == [1, 2]

    # the same training, longer: it goes on from epoch 2
    r = run_cli(*run, "max_iterations=4", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    second = summary(tmp_path)
    assert second["resumed"]["epoch"] == 2 and "_ep_2_" in second["resumed"]["checkpoint"]
    assert [h["iteration"] for h in second["history"]] == [3, 4]
    per_epoch = first["history"][1]["frames"] - first["history"][0]["frames"]
    assert second["history"][0]["frames"] == first["history"][-1]["frames"] + per_epoch  # frames go on too

    r = run_here(capsys, tmp_path, *run, "max_iterations=4")
    assert r.returncode == 2  # finished: nothing left to train
    assert "the run there finished" in r.stderr and "max_iterations > 4" in r.stderr
    # another plan: refused, nothing touched
    r = run_here(capsys, tmp_path, *run, "max_iterations=4", "num_envs=64")
    assert r.returncode == 2
    assert f"invalid run dir {tmp_path}" in r.stderr and "launch.resume=never" in r.stderr
    assert summary(tmp_path) == second


def test_a_bad_resume_mode_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Checked in this process (gmiexp.app.run): a config check, refused before anything starts."""
    from gmiexp.app import run

    assert run(compose_config(*RUN, "launch.resume=always"), tmp_path) == 2
    err = capsys.readouterr().err
    assert "launch.resume" in err and "auto, never" in err


def tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


@pytest.mark.slow
def test_a_preempted_submitit_job_is_requeued_and_resumes(tmp_path: Path, no_orphans: None) -> None:
    """Slurm's preemption as submitit_local plays it: SIGUSR2 to the job's task and every process under it."""
    sweep = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "gmiexp", "-m", "hydra/launcher=submitit_local", *RUN, "max_iterations=60",
           "gmis_per_gpu=2", "seed=3", f"hydra.sweep.dir={sweep}"]
    main = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
                            start_new_session=True)
    nn = sweep / "0" / "rl_games" / "run" / "nn"
    try:
        deadline = time.time() + 180
        while not list(nn.glob("last_*_ep_*.pth")) and main.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        tasks = [p for p in tree(main.pid) if "submitit.core._submit" in " ".join(cmdline(p))]
        assert len(tasks) == 1, "no running submitit task with a checkpoint written"
        for p in tree(tasks[0].pid):  # the task (the node's launcher) and its GMIs, as Slurm signals a step
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGUSR2)
        out, err = main.communicate(timeout=300)
    finally:
        if main.poll() is None:
            os.killpg(main.pid, signal.SIGKILL)
            main.wait()
    assert main.returncode == 0, err[-3000:]
    logs = "".join(p.read_text() for p in (sweep / ".submitit").glob("*/*_log.err"))
    assert "this job is preempted" in logs and "Requeued job" in logs
    s = summary(sweep / "0")
    assert s["status"] == "ok" and s["resumed"] is not None
    start = s["resumed"]["epoch"]
    assert 1 <= start < 60 and [h["iteration"] for h in s["history"]] == list(range(start + 1, 61))


def test_every_node_resumes_from_node_0s_checkpoint(tmp_path: Path) -> None:
    """GMI 0 (node 0) writes the checkpoints: node 1 must resume from the same file, not start afresh."""
    two = ["launch.nnodes=2", "launch.rdzv_endpoint=127.0.0.1:29400"]
    node0 = plan_of(tmp_path / "node0", *two, "launch.node_rank=0", "max_iterations=10")
    node1 = plan_of(tmp_path / "node1", *two, "launch.node_rank=1", "max_iterations=10")
    node1.save(tmp_path / "node1" / "plan.yaml")  # node 1's earlier attempt
    with pytest.raises(ConfigError, match="cannot see node 0's checkpoints"):  # a run dir the nodes do not share
        resume(node1, tmp_path / "node1", "auto")
    nn = tmp_path / "node0" / "rl_games" / "run" / "nn"
    nn.mkdir(parents=True)
    torch.save({"epoch": 4}, nn / "last_Cartpole_ep_4_rew_1.0.pth")
    latest = str(nn / "last_Cartpole_ep_4_rew_1.0.pth")
    assert resume(node1, tmp_path / "node1", "auto").resumed == {"checkpoint": latest, "epoch": 4}
    node0.save(tmp_path / "node0" / "plan.yaml")
    assert resume(node0, tmp_path / "node0", "auto").checkpoint == node1.checkpoint


def test_an_rsl_rl_checkpoint_under_another_name_counts_its_iterations(tmp_path: Path) -> None:
    """A population member's copy of an rsl_rl leader (``start.pth``) is ``iter + 1`` epochs, as ``model_<iter>.pt``
    (before: 0, the rl-games ``epoch`` it does not hold, so a resume counted its frames from 0)."""
    torch.save({"actor_state_dict": {}, "iter": 4}, tmp_path / "start.pth")
    torch.save({"epoch": 7}, tmp_path / "best.pth")
    assert epoch_of(tmp_path / "start.pth") == 5 and epoch_of(tmp_path / "best.pth") == 7
