"""GMIs die with their launcher (kill -9 included) and leave nothing in /dev/shm."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from gmitest import FAST, gmiexp_workers, popen_cli

from gmiexp.shm.cleanup import sweep_dead_runs
from gmiexp.shm.names import SHM_DIR, launcher_tag

SRC = str(Path(__file__).resolve().parents[2] / "src")
# A stand-in GMI: binds to the launcher named in its environment, holds a run segment, sleeps.
GMI = """
import os, sys, time
from gmiexp.shm.cleanup import cleanup_run
from gmiexp.launch import lifeline
tag = os.environ["GMIEXP_RUN_TAG"]
open(f"/dev/shm/gmiexp_{tag}_ring", "wb").write(b"x")
lifeline.bind(lambda: cleanup_run(tag))
print(os.getpid(), flush=True)
time.sleep(120)
"""
# The launcher: names itself to its children; with "indirect", a middle process sits in between.
LAUNCHER = """
import os, subprocess, sys, time
from gmiexp.shm.names import launcher_tag
from gmiexp.launch import lifeline
os.environ[lifeline.ENV] = lifeline.identity()
tag = os.environ["GMIEXP_RUN_TAG"] = launcher_tag()
print(tag, flush=True)
cmd = [sys.executable, "-c", sys.argv[1]]
if sys.argv[2] == "indirect":  # like an agent between launcher and worker: it survives the launcher
    cmd = [sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1:])", *cmd]
child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
print(child.stdout.readline().strip(), flush=True)
time.sleep(120)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}


def _gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("how", ["direct", "indirect"])  # PR_SET_PDEATHSIG; the watch on the launcher
def test_gmi_dies_with_a_killed_launcher_and_unlinks_the_runs_segments(how):
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, GMI, how], stdout=subprocess.PIPE,
                                text=True, env=_env())
    gmi = 0
    try:
        tag = launcher.stdout.readline().strip()
        gmi = int(launcher.stdout.readline())
        segment = SHM_DIR / f"gmiexp_{tag}_ring"
        assert segment.exists()
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        assert _gone(gmi), f"GMI {gmi} outlived its launcher"
        assert not segment.exists()
    finally:
        if gmi and not _gone(gmi, 0.1):
            os.kill(gmi, signal.SIGKILL)
        if launcher.poll() is None:
            launcher.kill()


def test_a_later_run_sweeps_the_segments_of_dead_launchers():
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = SHM_DIR / f"gmiexp_{launcher_tag(dead.pid)}_ring0_deadbeef"
    live = SHM_DIR / f"gmiexp_{launcher_tag()}_ring0_deadbeef"
    other = SHM_DIR / f"gmiexp_p{dead.pid}_ring0_deadbeef"  # not a launcher's tag: never guessed at
    for p in (stale, live, other):
        p.write_bytes(b"x")
    try:
        assert stale.name in sweep_dead_runs()
        assert not stale.exists() and live.exists() and other.exists()
    finally:
        for p in (stale, live, other):
            p.unlink(missing_ok=True)


@pytest.mark.slow
def test_kill_9_of_a_real_2_gmi_cartpole_run_leaves_nothing(tmp_path):
    p = popen_cli(*FAST, "num_gpus=1", "gmis_per_gpu=2", "reduction=mpr", "max_iterations=100000",
                  f"hydra.run.dir={tmp_path}")
    try:
        deadline = time.time() + 180
        while time.time() < deadline and len(gmiexp_workers(tmp_path)) < 2:
            time.sleep(0.5)
        workers = gmiexp_workers(tmp_path)
        assert len(workers) == 2, p.stderr.read() if p.poll() is not None else "GMIs did not start"
        # elastic's agent runs inside the launcher; warm GMIs are forked by its forkserver, a child of the launcher
        assert {w.ppid() for w in workers} <= {p.pid, *(c.pid for c in psutil.Process(p.pid).children())}
        segments = f"gmiexp_{p.pid}-*"  # the run tag names its launcher's pid (gmiexp.shm.names.launcher_tag)
        status = tmp_path / "gmis/1/status.json"
        while time.time() < deadline and '"training"' not in (status.read_text() if status.exists() else ""):
            time.sleep(0.5)  # training: the reduction's segments are in place
        os.kill(p.pid, signal.SIGKILL)  # the launcher only, not its process group
        p.wait()
        assert all(_gone(w.pid) for w in workers), [w.pid for w in gmiexp_workers(tmp_path)]
        assert not list(SHM_DIR.glob(segments))
    finally:
        for w in gmiexp_workers(tmp_path):
            w.kill()
        if p.poll() is None:
            p.kill()


def test_a_launcher_killed_but_not_yet_reaped_is_not_alive() -> None:
    """Its parent (a test, a shell) may reap it late; the GMIs' watch must not wait for that."""
    from gmiexp.launch import lifeline

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ident = lifeline.identity(child.pid)
        assert lifeline.alive(ident)
        child.kill()
        assert _gone(child.pid)  # a zombie now: dead, still listed
        assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
        assert not lifeline.alive(ident)
    finally:
        child.kill()
        child.wait()


# A stand-in job of a pack launcher: follows the process named in its environment, as app._train does.
JOB = """
import sys, time
from gmiexp.launch import lifeline
assert lifeline.follow(interval_s=0.1)
print("following", flush=True)
try:
    time.sleep(60)
except KeyboardInterrupt:  # what a launcher's Ctrl-C path takes: end the epoch, checkpoint, exit 130
    print("interrupted", flush=True)
    sys.exit(130)
"""


@pytest.mark.parametrize("sigint", ["default", "ignored"])  # ignored: a job started from a script's `&`
def test_a_job_stops_as_on_ctrl_c_once_its_pack_launcher_is_killed(sigint: str) -> None:
    """A pack launcher's or population controller's jobs run in their own sessions: before, ``kill -9`` of the
    launcher left them training on as orphans."""
    launcher = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint == "ignored" else None
    from gmiexp.launch import lifeline

    env = {**_env(), lifeline.JOB_ENV: lifeline.identity(launcher.pid)}
    job = subprocess.Popen([sys.executable, "-c", JOB], stdout=subprocess.PIPE, text=True, env=env,
                           start_new_session=True, preexec_fn=ignore)
    try:
        assert job.stdout.readline().strip() == "following"
        time.sleep(0.5)
        assert job.poll() is None  # its launcher runs: it goes on
        launcher.kill()
        assert job.wait(timeout=20) == 130
        assert job.stdout.read().strip() == "interrupted"
    finally:
        for p in (job, launcher):
            if p.poll() is None:
                p.kill()


def test_a_run_no_launcher_started_follows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from gmiexp.launch import lifeline

    monkeypatch.delenv(lifeline.JOB_ENV, raising=False)
    assert not lifeline.follow()
    assert lifeline.job_env()[lifeline.JOB_ENV] == lifeline.identity()
