import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from backend_helpers import nvml_host, plan_for, realise

from fakes import nvml as fake_nvml
from gmiexp.backends import get, mps_daemon
from gmiexp.backends.mps_clients import kept_by, planned_daemons, shares
from gmiexp.backends.mps_daemon import Daemon
from gmiexp.config.schema import BACKEND_SCHEMAS, MpsBackendConfig
from gmiexp.errors import ConfigError, LaunchError
from gmiexp.hardware import cpu_only, preset, with_mig
from gmiexp.plan import GMI, Plan

# ---- realise: the environment of every GMI --------------------------------


def test_preset_plan_env_of_every_gmi(private_tmp):
    tmp_path = private_tmp  # short: the MPS pipe path must fit a UNIX socket (pytest-xdist's tmp_path may not)
    plan, _ = realise(with_mig(preset("dgx_a100"), False), tmp_path / "run", num_gpus=2, gmis_per_gpu=3, name="mps",
                      memory_limit="10G")
    pipe, log = str(tmp_path / "run/mps/pipe"), str(tmp_path / "run/mps/log")
    assert plan.backend == "mps"
    for g in plan.gmis:
        assert g.env["CUDA_VISIBLE_DEVICES"] == str(g.device)
        assert g.env["CUDA_MPS_PIPE_DIRECTORY"] == pipe
        assert g.env["CUDA_MPS_LOG_DIRECTORY"] == log
        assert g.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "33"
        assert g.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=10G"
        assert g.share == "33%" and g.memory_limit == "10G"
        assert g.env["OMP_NUM_THREADS"] == str(g.torch_threads) == str(128 // 6)
    assert plan.setup_commands == [f"mkdir -p {pipe} {log} && CUDA_VISIBLE_DEVICES=0,1 CUDA_MPS_PIPE_DIRECTORY={pipe} "
                                   f"CUDA_MPS_LOG_DIRECTORY={log} nvidia-cuda-mps-control -d"]
    assert plan.teardown_commands == [f"echo quit | CUDA_MPS_PIPE_DIRECTORY={pipe} nvidia-cuda-mps-control"]
    assert Plan.from_yaml(plan.to_yaml()).to_dict() == plan.to_dict()


def test_the_private_daemon_serves_only_the_plans_gpus(tmp_path, fake_mps):
    """hardware.gpus=[3] on an 8-GPU host: the daemon a run starts sees GPU 3 only (CUDA_VISIBLE_DEVICES)."""
    hw = nvml_host(*(fake_nvml.h100_80gb(i) for i in range(8)))
    backend = get(BACKEND_SCHEMAS["mps"](name="mps"), hw)
    plan = plan_for(hw, 1, 2)
    for g in plan.gmis:
        g.device = 3  # as plan.build.place_devices moves them
    plan = backend.realise(plan, tmp_path / "run")
    (daemon,) = plan.mps.daemons
    assert daemon["visible"] == hw.gpus[3].uuid
    assert f"CUDA_VISIBLE_DEVICES={hw.gpus[3].uuid} CUDA_MPS_PIPE_DIRECTORY=" in plan.setup_commands[0]
    assert Daemon(**daemon).env()["CUDA_VISIBLE_DEVICES"] == hw.gpus[3].uuid  # what control() starts it with


def test_real_host_uses_gpu_uuids(tmp_path, fake_mps):
    hw = nvml_host(fake_nvml.h100_80gb(0), fake_nvml.h100_80gb(1))
    plan, _ = realise(hw, tmp_path, num_gpus=2, gmis_per_gpu=2, name="mps")
    for g in plan.gmis:
        assert g.env["CUDA_VISIBLE_DEVICES"] == hw.gpus[g.device].uuid
        assert g.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert g.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
        assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in g.env


def test_sm_percent_by_local_index(tmp_path):
    plan, _ = realise(with_mig(preset("h200x1"), False), tmp_path, gmis_per_gpu=3, name="mps", sm_percent=[50, 30, 20])
    assert [g.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] for g in plan.gmis] == ["50", "30", "20"]


def _mixed_gpu_gmis() -> list[GMI]:
    return [GMI(id=0, device=0, roles=["trainer"], local_index=0),
            GMI(id=1, device=0, roles=["simulator", "agent"], num_envs=8, local_index=1),
            GMI(id=2, device=0, roles=["simulator", "agent"], num_envs=8, local_index=2)]


def test_role_overrides_and_rest_split_evenly():
    assert shares(_mixed_gpu_gmis(), None, {"trainer": 60}) == [60, 20, 20]
    assert shares(_mixed_gpu_gmis(), None, {}) == [33, 33, 33]


# ---- bad input --------------------------------------------------------------


def test_refuses_cpu_host(tmp_path):
    with pytest.raises(ConfigError, match="backend=mps needs an NVIDIA GPU.*valid here: direct"):
        realise(cpu_only(), tmp_path, name="mps")


def test_refuses_host_without_control_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    with pytest.raises(ConfigError, match="needs nvidia-cuda-mps-control on PATH"):
        realise(nvml_host(fake_nvml.a100_40gb()), tmp_path, name="mps")


def test_an_exclusive_gpu_takes_every_gmi_through_its_one_daemon_and_a_prohibited_one_none(tmp_path, fake_mps):
    """EXCLUSIVE_PROCESS admits one process: MPS's daemon is it, so its clients share the GPU (NVIDIA's advice)."""
    gpus = [fake_nvml.h100_80gb(0), fake_nvml.h100_80gb(1)]
    gpus[0].compute_mode, gpus[1].compute_mode = 3, 2
    hw = nvml_host(*gpus)
    plan, _ = realise(hw, tmp_path, num_gpus=1, gmis_per_gpu=4, name="mps")
    assert [g.device for g in plan.gmis] == [0, 0, 0, 0]
    with pytest.raises(ConfigError, match=r"invalid GPU 1 for backend=mps: its compute mode is PROHIBITED"):
        realise(hw, tmp_path, num_gpus=2, gmis_per_gpu=2, name="mps")


def test_refuses_mig_enabled_gpu(tmp_path, fake_mps):
    hw = nvml_host(fake_nvml.a100_40gb(mig=1, migs=fake_nvml.a100_migs()))
    with pytest.raises(ConfigError, match=r"MIG is enabled on it.*valid here: backend=mig backend.mps_in_mig=true"):
        realise(hw, tmp_path, name="mps")


def test_refuses_pre_volta(tmp_path, fake_mps):
    with pytest.raises(ConfigError, match=r"compute capability >= 7.0.*has 6.0; use backend=direct"):
        realise(nvml_host(fake_nvml.p100()), tmp_path, name="mps")


@pytest.mark.parametrize("cfg, message", [
    (dict(sm_percent=[70, 50]), r"sum to 120% > 100% \(GMI 0: 70%, GMI 1: 50%\)"),
    (dict(sm_percent=[50]), r"invalid backend.sm_percent: \[50\]; valid: a list of 2 percentages"),
    (dict(sm_percent=[0, 50]), r"invalid SM share of GMI 0: 0; valid: 1..100"),
    (dict(role_sm_percent={"learner": 50}), r"invalid backend.role_sm_percent role: 'learner'; "
                                            r"valid: simulator, agent, trainer"),
    (dict(role_sm_percent={"trainer": 120}), r"invalid SM share of GMI 0: 120"),
    (dict(memory_limit="lots"), r"invalid memory limit of GMI 0: 'lots'; valid: a size such as"),
    (dict(memory_limit="50G"), r"invalid memory limit of GMI 0: '50G'; valid: at most 40960M"),
    (dict(memory_limit="30G"), r"memory limits on GPU 0 sum to 61440M > its 40960M"),
])
def test_bad_shares_and_limits(tmp_path, cfg, message):
    with pytest.raises(ConfigError, match=message):
        realise(with_mig(preset("dgx_a100"), False), tmp_path, name="mps", **cfg)


def test_role_overrides_leaving_nothing():
    with pytest.raises(ConfigError, match=r"leaves 0% for 2 other GMI"):
        shares(_mixed_gpu_gmis(), None, {"trainer": 100})


# ---- session: the daemon's whole life --------------------------------------


def _session(tmp_path, **cfg):
    hw = nvml_host(fake_nvml.a100_40gb())
    run = tmp_path / "run"
    plan, backend = realise(hw, run, name="mps", **cfg)
    return plan, backend, run


def _assert_once(fake, pipe: str) -> None:
    assert fake.count("argv -d") == 1
    assert fake.count("cmd quit") == 1
    assert not Path(pipe, mps_daemon.PID_FILE).exists()


def test_daemon_started_serving_and_quit_once(tmp_path, fake_mps):
    plan, backend, run = _session(tmp_path)
    pipe = plan.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"]
    with backend.session(plan, run):
        assert fake_mps.sent() == ["argv -d", "argv", "cmd get_server_list"]
        pid = mps_daemon.pid_of(pipe)
        assert pid is not None
        assert (run / "mps/log/control.log").read_text().count("Starting control daemon") == 1
        # a client sees the daemon through the GMI's environment only
        env = {**os.environ, **plan.gmis[1].env}
        out = subprocess.run(["nvidia-cuda-mps-control"], input="get_default_active_thread_percentage\n",
                             env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "100.0"
    _assert_once(fake_mps, pipe)
    assert mps_daemon.pid_of(pipe) is None


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_quit_once_when_body_raises(tmp_path, fake_mps, exc):
    plan, backend, run = _session(tmp_path)
    with pytest.raises(exc):
        with backend.session(plan, run):
            raise exc("boom")
    _assert_once(fake_mps, plan.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"])


def test_quit_once_when_a_worker_crashes(tmp_path, fake_mps):
    plan, backend, run = _session(tmp_path)
    with pytest.raises(LaunchError, match="GMI 1 exited with 3"):
        with backend.session(plan, run):
            rc = subprocess.run([sys.executable, "-c", "import sys; sys.exit(3)"],
                                env={**os.environ, **plan.gmis[1].env}, check=False).returncode
            raise LaunchError(f"GMI 1 exited with {rc}")
    _assert_once(fake_mps, plan.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"])


def test_quit_once_on_sigterm(tmp_path, fake_mps):
    plan, backend, run = _session(tmp_path)
    with pytest.raises(SystemExit) as info:
        with backend.session(plan, run):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause()  # the handler raises before this returns
    assert info.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    _assert_once(fake_mps, plan.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"])


def test_start_failure_is_reported_and_nothing_left(tmp_path, fake_mps, monkeypatch):
    plan, backend, run = _session(tmp_path)
    monkeypatch.setenv("FAKE_MPS_FAIL", "start")
    with pytest.raises(mps_daemon.MPSError, match="nvidia-cuda-mps-control -d failed .exit 1.: fake: cannot"):
        with backend.session(plan, run):
            pytest.fail("the body must not run")
    assert fake_mps.sent() == ["argv -d"]  # nothing started, nothing to quit


def test_daemon_that_does_not_serve_is_refused_and_stopped(tmp_path, fake_mps, monkeypatch):
    plan, backend, run = _session(tmp_path)
    monkeypatch.setenv("FAKE_MPS_FAIL", "serve")
    with pytest.raises(mps_daemon.MPSError, match="does not answer get_server_list"):
        with backend.session(plan, run):
            pytest.fail("the body must not run")
    pipe = plan.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"]
    assert fake_mps.count("cmd quit") == 1
    assert mps_daemon.pid_of(pipe) is None  # quit was ignored, so SIGTERM ended it


def test_no_pid_file_is_refused(tmp_path, fake_mps, monkeypatch):
    plan, backend, run = _session(tmp_path)
    monkeypatch.setenv("FAKE_MPS_FAIL", "nopid")
    with pytest.raises(mps_daemon.MPSError, match="wrote no live nvidia-cuda-mps-control.pid"):
        with backend.session(plan, run):
            pytest.fail("the body must not run")
    assert fake_mps.count("cmd quit") == 0


def test_long_run_dir_puts_pipes_under_tmp_and_removes_them(tmp_path, fake_mps):
    hw = nvml_host(fake_nvml.a100_40gb())
    run = tmp_path / ("x" * 90)
    plan, backend = realise(hw, run, name="mps")
    pipe = plan.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"]
    assert len(pipe) <= mps_daemon.MAX_PIPE_DIR_LEN and not pipe.startswith(str(run))
    assert plan.gmis[0].env["CUDA_MPS_LOG_DIRECTORY"].startswith(str(run))
    with backend.session(plan, run):
        assert Path(pipe, mps_daemon.PID_FILE).exists()
    assert not Path(pipe).exists()


def test_daemon_existing_joins_without_start_or_quit(tmp_path, fake_mps, monkeypatch):
    existing = mps_daemon.Daemon(pipe_dir=str(tmp_path / "sys/pipe"), log_dir=str(tmp_path / "sys/log"))
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", existing.pipe_dir)
    monkeypatch.setenv("CUDA_MPS_LOG_DIRECTORY", existing.log_dir)
    mps_daemon.start(existing)
    try:
        plan, backend, run = _session(tmp_path, daemon="existing")
        assert plan.setup_commands == [] and plan.teardown_commands == []
        assert {g.env["CUDA_MPS_PIPE_DIRECTORY"] for g in plan.gmis} == {existing.pipe_dir}
        with backend.session(plan, run):
            pass
        assert fake_mps.count("argv -d") == 1 and fake_mps.count("cmd quit") == 0
        assert mps_daemon.pid_of(existing.pipe_dir) is not None
    finally:
        mps_daemon.quit_daemon(existing)


def test_daemon_existing_without_a_daemon_is_refused(tmp_path, fake_mps, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "nothing"))
    plan, backend, run = _session(tmp_path, daemon="existing")
    with pytest.raises(ConfigError, match="daemon=existing but no MPS control daemon serves at.*private, shared"):
        with backend.session(plan, run):
            pytest.fail("the body must not run")
    assert fake_mps.count("argv -d") == 0


def test_preset_session_refuses_and_starts_nothing(tmp_path, fake_mps):
    hw = with_mig(preset("dgx_a100"), False)
    backend = get(MpsBackendConfig(), hw)
    plan = backend.realise(plan_for(hw), tmp_path)
    with pytest.raises(ConfigError, match="hardware=dgx_a100 is a preset for planning only"):
        with backend.session(plan, tmp_path):
            pytest.fail("the body must not run")
    assert fake_mps.sent() == []


# ---- a launcher killed with SIGKILL: its private daemon goes too ----------

SRC = str(Path(__file__).resolve().parents[2] / "src")
# A stand-in launcher: runs the plan's daemons as the backend's session does, starts stand-in GMIs
# that bind to it as launch/worker.py does, prints the daemon's and the GMIs' pids, waits for SIGKILL.
STANDIN_LAUNCHER = """
import os, subprocess, sys, time
from gmiexp.backends import mps_daemon, mps_session
from gmiexp.backends.mps_clients import planned_daemons
from gmiexp.launch import lifeline
from gmiexp.plan import Plan
os.environ[lifeline.ENV] = lifeline.identity()
plan = Plan.load(sys.argv[1])
with mps_session.running(planned_daemons(plan)):
    print(mps_daemon.pid_of(plan.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"]), flush=True)
    gmis = [subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[1], str(g.id)], stdout=subprocess.PIPE,
                             text=True) for g in plan.gmis]
    for g in gmis:
        print(g.stdout.readline().strip(), flush=True)
    time.sleep(120)
"""
STANDIN_GMI = """
import os, sys, time
from gmiexp.launch.worker import bind_to_launcher
from gmiexp.plan import Plan
assert bind_to_launcher(Plan.load(sys.argv[1]), int(sys.argv[2]))
print(os.getpid(), flush=True)
time.sleep(120)
"""


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


def test_kill_9_of_the_launcher_quits_its_private_daemon_once(tmp_path, fake_mps):
    plan, _, run = _session(tmp_path)
    plan_path = plan.save(run / "plan.yaml")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    launcher = subprocess.Popen([sys.executable, "-c", STANDIN_LAUNCHER, str(plan_path), STANDIN_GMI],
                                stdout=subprocess.PIPE, text=True, env=env)
    daemon, gmis = 0, []
    try:
        daemon = int(launcher.stdout.readline())
        gmis = [int(launcher.stdout.readline()) for _ in plan.gmis]
        assert len(gmis) == 2
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        assert all(_gone(pid) for pid in gmis), "a GMI outlived its launcher"
        assert _gone(daemon), "the private MPS daemon outlived its launcher"
        assert fake_mps.count("cmd quit") == 1  # by GMI 0 alone, through the control tool
    finally:
        for pid in [*gmis, daemon]:
            if pid and not _gone(pid, 0.1):
                os.kill(pid, signal.SIGKILL)
        if launcher.poll() is None:
            launcher.kill()


@pytest.mark.parametrize("mode", ["shared", "existing"])
def test_no_gmi_quits_a_shared_or_existing_daemon_when_orphaned(tmp_path, fake_mps, monkeypatch, mode):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "system-pipe"))
    plan, _, _ = _session(tmp_path, daemon=mode)
    assert [kept_by(plan, g.id) for g in plan.gmis] == [[], []]
    assert mps_daemon.quit_detached(planned_daemons(plan)) is None
    with pytest.raises(LaunchError, match=f"refusing to quit the {mode} MPS daemon"):
        mps_daemon.quit_private(planned_daemons(plan)[0])
    assert fake_mps.sent() == []
