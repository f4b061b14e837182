"""backend.daemon=shared: concurrent runs on one GPU set share one MPS daemon; the last one quits it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from backend_helpers import nvml_host, realise

from fakes import nvml as fake_nvml
from gmiexp.backends import mps_daemon, mps_shared
from gmiexp.errors import ConfigError

SRC = str(Path(__file__).resolve().parents[2] / "src")
HOLDER = """
import sys, tempfile
tempfile.tempdir = sys.argv[1]
from gmiexp.backends import mps_daemon, mps_shared
d = mps_daemon.shared_daemon(sys.argv[2])
ref = mps_shared.acquire(d)
print("held", flush=True)
sys.stdin.readline()
mps_shared.release(d, ref)
print("left", flush=True)
"""


@pytest.fixture
def shared_tmp(private_tmp):
    """Shared daemons live under the temp dir: the test's own (conftest ``private_tmp``)."""
    return private_tmp


def holder(tmp_root: Path, visible: str) -> subprocess.Popen:
    """Another gmiexp run holding the shared daemon, in its own process (waits for a line on stdin)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_root), visible], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "held"
    return p


def shared_run(tmp_path: Path, name: str):
    hw = nvml_host(fake_nvml.a100_40gb(0))
    plan, backend = realise(hw, tmp_path / name, name="mps", daemon="shared")
    return hw, plan, backend


def test_every_gmi_points_at_the_shared_daemon_of_its_gpu_set(tmp_path, shared_tmp, fake_mps):
    hw, plan, _ = shared_run(tmp_path, "a")
    d = mps_daemon.shared_daemon(hw.gpus[0].uuid)
    assert d.pipe_dir.startswith(str(shared_tmp)) and str(tmp_path / "a") not in d.pipe_dir
    assert {g.env["CUDA_MPS_PIPE_DIRECTORY"] for g in plan.gmis} == {d.pipe_dir}
    assert plan.mps.daemon == "shared"
    _, again, _ = shared_run(tmp_path, "b")  # another run on the same GPU: the same daemon
    assert again.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"] == d.pipe_dir
    other = mps_daemon.shared_daemon(fake_nvml.a100_40gb(1).uuid)  # GPU 1: a daemon of its own
    assert other.pipe_dir != d.pipe_dir


def test_two_concurrent_runs_one_start_one_quit(tmp_path, shared_tmp, fake_mps):
    hw, plan, backend = shared_run(tmp_path, "b")
    pipe = plan.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"]
    first = holder(shared_tmp, hw.gpus[0].uuid)  # run A starts the daemon
    try:
        assert fake_mps.count("argv -d") == 1
        with backend.session(plan, tmp_path / "b"):  # run B joins it
            assert fake_mps.count("argv -d") == 1
            first.stdin.write("\n")
            first.stdin.flush()
            assert first.stdout.readline().strip() == "left"  # A leaves first: B still holds it
            assert first.wait(timeout=30) == 0
            assert mps_daemon.pid_of(pipe) is not None and fake_mps.count("cmd quit") == 0
    finally:
        first.kill()
    assert fake_mps.count("argv -d") == 1 and fake_mps.count("cmd quit") == 1  # B, the last, quit it
    assert mps_daemon.pid_of(pipe) is None
    assert list((Path(pipe).parent / mps_shared.HOLDERS).iterdir()) == []


def test_a_crashed_holder_does_not_keep_the_daemon_alive(tmp_path, shared_tmp, fake_mps):
    hw, plan, backend = shared_run(tmp_path, "c")
    pipe = plan.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"]
    crashed = holder(shared_tmp, hw.gpus[0].uuid)
    crashed.send_signal(signal.SIGKILL)  # kill -9: its reference stays behind
    crashed.wait(timeout=30)
    refs = list((Path(pipe).parent / mps_shared.HOLDERS).iterdir())
    assert [json.loads(r.read_text())["pid"] for r in refs] == [crashed.pid]
    with backend.session(plan, tmp_path / "c"):
        assert fake_mps.count("argv -d") == 1  # joined the daemon the crashed run left serving
    assert fake_mps.count("cmd quit") == 1 and mps_daemon.pid_of(pipe) is None
    assert list((Path(pipe).parent / mps_shared.HOLDERS).iterdir()) == []


def test_a_reused_pid_is_not_a_holder(tmp_path):
    ref = tmp_path / "ref"
    ref.write_text(json.dumps({"pid": os.getpid(), "started": 1.0}))  # this pid, another start time
    assert not mps_shared.holds(ref)
    ref.write_text(json.dumps({"pid": os.getpid(), "started": mps_shared._started_at(os.getpid())}))
    assert mps_shared.holds(ref)


def test_unknown_daemon_mode_is_refused(tmp_path, fake_mps):
    with pytest.raises(ConfigError, match="invalid backend.daemon: 'public'; valid: private, shared, existing"):
        realise(nvml_host(fake_nvml.a100_40gb(0)), tmp_path, name="mps", daemon="public")
