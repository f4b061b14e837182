"""On a real GPU: a private MPS daemon serves 2 GMIs on one GPU, and NVML sees both as MPS clients."""

import os
import shutil
import subprocess
import sys
import time

import psutil
import pytest
from backend_helpers import plan_for

from gmiexp.backends import get
from gmiexp.config.schema import MpsBackendConfig
from gmiexp.hardware import discover

pytestmark = pytest.mark.gpu

WORKER = """
import sys, time, torch
x = torch.randn(2048, 2048, device="cuda")
sys.stdout.write("ready\\n"); sys.stdout.flush()
t = time.time()
while time.time() - t < float(sys.argv[1]):
    x = (x @ x).tanh()
torch.cuda.synchronize()
"""


def _mps_pids(nvml, index: int) -> set[int]:
    nvml.nvmlInit()
    try:
        h = nvml.nvmlDeviceGetHandleByIndex(index)
        return {p.pid for p in nvml.nvmlDeviceGetMPSComputeRunningProcesses(h)}
    finally:
        nvml.nvmlShutdown()


def test_two_gmis_share_one_gpu_through_mps(tmp_path):
    import pynvml

    hw = discover(pynvml)
    if not hw.has_gpu or shutil.which("nvidia-cuda-mps-control") is None:
        pytest.skip("needs an NVIDIA GPU and nvidia-cuda-mps-control")
    if hw.gpus[0].mig_mode:
        pytest.skip("GPU 0 has MIG enabled; MPS on the whole GPU needs it off")
    backend = get(MpsBackendConfig(), hw)
    plan = backend.realise(plan_for(hw, num_gpus=1, gmis_per_gpu=2), tmp_path)
    with backend.session(plan, tmp_path):
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, "20"], env={**os.environ, **g.env},
                                  stdout=subprocess.PIPE, text=True) for g in plan.gmis]
        try:
            for p in procs:
                assert p.stdout.readline().strip() == "ready"
            want = {p.pid for p in procs}
            seen: set[int] = set()
            deadline = time.time() + 15
            while not want <= seen and time.time() < deadline:
                seen |= _mps_pids(pynvml, 0)
                time.sleep(0.5)
            assert want <= seen, f"NVML MPS clients {seen}, GMI pids {want}"
        finally:
            for p in procs:
                p.wait(timeout=120)
        assert [p.returncode for p in procs] == [0, 0]


def test_two_runs_with_a_shared_daemon_meet_one_mps_server(tmp_path):
    """backend.daemon=shared: two concurrent runs on GPU 0 are clients of one server, quit by the last."""
    import pynvml

    from gmiexp.backends import mps_daemon

    hw = discover(pynvml)
    if not hw.has_gpu or shutil.which("nvidia-cuda-mps-control") is None:
        pytest.skip("needs an NVIDIA GPU and nvidia-cuda-mps-control")
    if hw.gpus[0].mig_mode:
        pytest.skip("GPU 0 has MIG enabled; MPS on the whole GPU needs it off")
    runs = []
    for name in ("a", "b"):
        backend = get(MpsBackendConfig(daemon="shared"), hw)
        runs.append((backend, backend.realise(plan_for(hw, num_gpus=1, gmis_per_gpu=1), tmp_path / name)))
    (ba, pa), (bb, pb) = runs
    pipe = pa.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"]
    assert pb.gmis[0].env["CUDA_MPS_PIPE_DIRECTORY"] == pipe
    with ba.session(pa, tmp_path / "a"), bb.session(pb, tmp_path / "b"):
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, "20"], env={**os.environ, **p.gmis[0].env},
                                  stdout=subprocess.PIPE, text=True) for p in (pa, pb)]
        try:
            for p in procs:
                assert p.stdout.readline().strip() == "ready"
            want = {p.pid for p in procs}
            seen: set[int] = set()
            deadline = time.time() + 15
            while not want <= seen and time.time() < deadline:
                seen |= _mps_pids(pynvml, 0)
                time.sleep(0.5)
            assert want <= seen, f"NVML MPS clients {seen}, pids of the two runs {want}"
            daemon = psutil.Process(mps_daemon.pid_of(pipe))
            servers = [c for c in daemon.children() if c.name() == "nvidia-cuda-mps-server"]
            assert len(servers) == 1, servers  # one server: the runs' kernels are not time-sliced
        finally:
            for p in procs:
                p.wait(timeout=120)
    assert mps_daemon.pid_of(pipe) is None  # the last run out quit it
