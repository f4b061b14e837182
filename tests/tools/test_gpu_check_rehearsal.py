"""A rehearsal of ``make gpu-check`` on this CPU host: the whole kit runs real ``python -m gmiexp`` processes on a
fake H100 (NVML from ``tests/fakes``, whose MPS client list is the processes a live fake daemon serves), the fake
``nvidia-cuda-mps-control``, the CPU for the GMIs' tensors and the ``lazy`` stand-in in place of ``cuda``.

It must pass, and fail when a GMI is not an MPS client (NVML leaves it out: CUDA ran it without MPS) and when a
run times out; the reports are kept in ``$GPU_CHECK_REHEARSAL_DIR`` when that is set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gmitest import TESTS_DIR

from fakes import mps as fake_mps_mod
from fakes import nvml as fake_nvml
from gmiexp.tools import gpu_check

SMALL = ["--iterations", "2", "--num-envs", "16", "--extra", "train.device=cpu", "train.horizon_length=8",
         "train.minibatch_size=64", "train.mini_epochs=1", "--device", "lazy", "--device-layout", "tdg_ex",
         "--gpu-tests", "", "--timeout", "240"]


@pytest.fixture
def fake_gpu_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_tmp: Path):
    """Runs see one fake H100 (MIG off) and the fake MPS control binary; the check reads the same NVML."""
    fake_mps_mod.install(tmp_path, monkeypatch)
    src = str(Path(gpu_check.__file__).resolve().parents[2])
    path = [str(TESTS_DIR / "fakes" / "gpu_host"), src, str(TESTS_DIR / "helpers"), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in path if p))
    monkeypatch.setenv("FAKE_NVML_GPUS", "1")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("FAKE_NVML_NOT_MPS", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # the fake host's GPUs, not this process's share
    yield fake_nvml.make([fake_nvml.h100_80gb(0, mig=0)], mps_from_proc=True)
    left = fake_mps_mod.live_daemons(tmp_path)
    fake_mps_mod.kill(left)
    assert not left, f"MPS daemons left running: {left}"


def rehearse(tmp_path: Path, nvml, name: str, *args: str) -> tuple[int, str]:
    out = tmp_path / f"{name}.md"
    code = gpu_check.main(["--out", str(out), "--runs", str(tmp_path / "runs"), *SMALL, *args], nvml=nvml)
    keep = os.environ.get("GPU_CHECK_REHEARSAL_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(out, Path(keep) / out.name)
    return code, out.read_text()


@pytest.mark.slow  # about 10 runs of gmiexp: minutes on a loaded 2-core host
@pytest.mark.timeout(900)  # a cold Warp cache adds a minute to the mjlab case
def test_the_kit_passes_on_the_fakes_and_the_stand_in(tmp_path: Path, fake_gpu_host, no_orphans: None) -> None:
    code, text = rehearse(tmp_path, fake_gpu_host, "gpu-check-pass", "--layouts", "tcg_ex", "tdg",
                          "--throughput-s", "15")
    assert code == 0, text
    for row in ("| tcg_ex-direct | passed |", "| tcg_ex-mps | passed |", "| tdg-mps | passed |",
                "| tcg_ex-mps-mpr | passed |", "| tcg_ex-mps-har | passed |", "| tcg_ex-mps-allreduce | passed |",
                "| tdg_ex-mps-device-lazy | passed |", "| tcg_ex-mps-MjlabCartpole | passed |", "| pbt-mps | passed |",
                "| throughput-1-vs-2-mps | passed | 2 vs 1 GMIs per GPU: ",
                "| tcg_ex-mig | not applicable | MIG is disabled on GPU(s) [0]"):
        assert row in text, text
    assert "mps_clients: 2 of 2 GMIs seen by NVML as MPS clients" in text
    assert "reduction: plan har; trainer GMIs built ['har']" in text


@pytest.mark.slow  # 30-60 s of a real population; the kit's evidence rules are tested on FakeRuns by default
@pytest.mark.timeout(600)
def test_the_kit_s_population_shares_the_gpu_s_daemon_and_exploits_in_place(tmp_path: Path, fake_gpu_host,
                                                                          no_orphans: None) -> None:
    """2 members of 2 GMIs on the fake H100's one MPS daemon; the member behind takes the leader's state in place."""
    code, text = rehearse(tmp_path, fake_gpu_host, "gpu-check-pbt", "--cases", "pbt-mps", "--throughput-s", "0")
    assert code == 0, text
    assert "| pbt-mps | passed | " in text
    for m in (0, 1):
        assert f"member {m} life0 mps_clients: 2 of 2 GMIs seen by NVML as MPS clients" in text, text
    assert re.search(r"exploits: [1-9]\d* taken in place, ", text), text


def test_the_kit_fails_when_a_gmi_is_not_an_mps_client(tmp_path: Path, fake_gpu_host, monkeypatch,
                                                        no_orphans: None) -> None:
    monkeypatch.setenv("FAKE_NVML_NOT_MPS", "1")
    code, text = rehearse(tmp_path, fake_gpu_host, "gpu-check-not-mps", "--cases", "tcg_ex-mps",
                          "--throughput-s", "0")
    assert code == 1, text
    assert "| tcg_ex-mps | failed | no evidence: 1 of 2 GMIs seen by NVML as MPS clients |" in text
    assert "reduction: plan allreduce; trainer GMIs built ['allreduce']" in text  # it ran: only the client is missing


def test_the_kit_fails_when_a_run_times_out(tmp_path: Path, fake_gpu_host, no_orphans: None) -> None:
    code, text = rehearse(tmp_path, fake_gpu_host, "gpu-check-timeout", "--cases", "tcg_ex-mps",
                          "--throughput-s", "0", "--timeout", "3")
    assert code == 1, text
    assert "| tcg_ex-mps | failed | timed out after 3 s (--timeout) |" in text


def test_the_fake_lists_a_gmi_as_a_client_once_its_status_names_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A GMI holds no CUDA context before it writes its status; a warm one's /proc environment is the fork
    server's, so before that the fake cannot tell which GMI it is (it took it for GMI 0, and under
    ``FAKE_NVML_NOT_MPS`` listed the second GMI as a client now and then)."""
    monkeypatch.delenv("FAKE_NVML_NOT_MPS", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    pipe = tmp_path / "pipe"
    pipe.mkdir()
    (pipe / "nvidia-cuda-mps-control.pid").write_text(str(os.getpid()))  # a live "daemon"
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_VISIBLE_DEVICES": "0"}
    plan = tmp_path / "run" / "plan.yaml"
    plan.parent.mkdir()
    plan.write_text(yaml.safe_dump({"gmis": [{"id": 0, "env": env}, {"id": 1, "env": env}]}))
    title = f"{sys.executable} -u -m gmiexp.launch.worker {plan}"
    gmi = subprocess.Popen([sys.executable, "-c", "import setproctitle, sys, time; setproctitle.setproctitle("
                            f"{title!r}); print('named', flush=True); time.sleep(120)"],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert gmi.stdout.readline().strip() == "named"
        gpu = fake_nvml.h100_80gb(0)
        assert gmi.pid not in dict(fake_nvml.mps_clients_from_proc(gpu, 0))
        status = plan.parent / "gmis" / "1" / "status.json"
        status.parent.mkdir(parents=True)
        status.write_text(json.dumps({"gmi": 1, "pid": gmi.pid}))
        assert gmi.pid in dict(fake_nvml.mps_clients_from_proc(gpu, 0))
        monkeypatch.setenv("FAKE_NVML_NOT_MPS", "1")  # the second GMI of the run: left out
        assert gmi.pid not in dict(fake_nvml.mps_clients_from_proc(gpu, 0))
    finally:
        gmi.kill()
        gmi.wait()
