"""make gpu-check: exits 2 without a GPU; on a (fake) GPU host runs the right matrix and writes its evidence."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml
from gmitest import cli_env

from fakes import nvml as fake_nvml
from gmiexp.layouts import LAYOUTS
from gmiexp.tools import gpu_check

ROOT = Path(__file__).resolve().parents[2]


def test_host_without_gpu_exits_2_and_says_so(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gmiexp.tools.gpu_check", "--out", str(tmp_path / "r.md")],
                       capture_output=True, text=True, env=cli_env(), timeout=120)
    assert r.returncode == 2, r.stderr
    assert "this host has no NVIDIA GPU" in r.stderr and "gpu-check needs one" in r.stderr
    assert not (tmp_path / "r.md").exists()


def test_make_target_calls_the_module():
    make = (ROOT / "Makefile").read_text()
    assert "gpu-check: venv\n\t$(PY) -m gmiexp.tools.gpu_check\n" in make


class FakeRuns:
    """Stands in for the subprocesses: pytest -m gpu, and each smoke run writing what a real one writes."""

    def __init__(self, gpu: fake_nvml.FakeGPU) -> None:
        self.gpu = gpu
        self.cmds: list[list[str]] = []

    def __call__(self, cmd, **kw):
        self.cmds.append(cmd)
        if "pytest" in cmd:
            return subprocess.CompletedProcess(cmd, 0, "3 passed, 120 deselected in 41.0s\n", "")
        args = dict(a.split("=", 1) for a in cmd[3:])
        run = Path(args["hydra.run.dir"])
        if args["layout"] == "decoupled_async":
            return subprocess.CompletedProcess(cmd, 2, "", "gmiexp: error: invalid num_gpus: 1; valid: >= 2\n")
        pids = [41000, 41001]
        mig = None
        if args["backend"] == "mig":
            mig = {"instances": [{"gmi": i, "uuid": m.uuid} for i, m in enumerate(self.gpu.migs)]}
        run.mkdir(parents=True)
        (run / "plan.yaml").write_text(yaml.safe_dump({"gmis": [{"id": 0}, {"id": 1}], "mig": mig}))
        for g, pid in enumerate(pids):
            (run / "gmis" / str(g)).mkdir(parents=True)
            (run / "gmis" / str(g) / "status.json").write_text(json.dumps({"gmi": g, "pid": pid}))
        if "mps" in args["backend"] or args.get("backend.mps_in_mig") == "true":
            self.gpu.mps_procs = [(pid, 1 << 30) for pid in pids]
            time.sleep(1.2)  # the MPS watch samples while the run trains
            self.gpu.mps_procs = []
        metrics = {"gmi/0/peak_mem_mb": 1234.0, "gmi/1/peak_mem_mb": 1300.0, "gmi/0/sm_util": 41.0}
        (run / "summary.json").write_text(json.dumps({"status": "ok", "metrics": metrics}))
        return subprocess.CompletedProcess(cmd, 0, "gmiexp ok: ... env_steps/s=1,000\n", "")


def test_mig_off_host_runs_every_layout_on_direct_and_mps(tmp_path):
    gpu = fake_nvml.h100_80gb(0, mig=0)
    runs = FakeRuns(gpu)
    out = tmp_path / "gpu-check.md"
    code = gpu_check.main(["--out", str(out), "--runs", str(tmp_path / "runs")], nvml=fake_nvml.make([gpu]),
                          runner=runs, which=lambda name: f"/usr/bin/{name}")
    assert code == 0
    smoke = [c for c in runs.cmds if "pytest" not in c]
    assert sorted((dict(a.split("=", 1) for a in c[3:])["layout"], c[4]) for c in smoke) == sorted(
        (layout, f"backend={b}") for layout in LAYOUTS for b in ("direct", "mps"))
    assert all("gmis_per_gpu=2" in c and "num_gpus=1" in c for c in smoke)
    text = out.read_text()
    assert "## gpu-marked tests: passed" in text and "3 passed, 120 deselected" in text
    assert "| tcg_ex-mps | passed |" in text and "| decoupled_async-direct | not applicable |" in text
    assert "mps_clients: 2 of 2 GMIs seen by NVML as MPS clients" in text
    assert "gmi 0: peak 1234 MiB, SM 41%" in text and "gmi 1: peak 1300 MiB" in text


def test_mig_host_runs_mig_and_mps_inside_mig_and_names_the_instances(tmp_path):
    gpu = fake_nvml.a100_40gb(0, mig=1, migs=fake_nvml.a100_migs())
    runs = FakeRuns(gpu)
    out = tmp_path / "gpu-check.md"
    code = gpu_check.main(["--out", str(out), "--runs", str(tmp_path / "runs")], nvml=fake_nvml.make([gpu]),
                          runner=runs, which=lambda name: f"/usr/bin/{name}")
    assert code == 0
    text = out.read_text()
    rows = [ln.split(" | ")[0].lstrip("| ") for ln in text.splitlines() if ln.startswith("| ") and "passed" in ln]
    assert sorted(rows) == sorted(f"{layout}-mig{x}" for layout in LAYOUTS if layout != "decoupled_async"
                                  for x in ("", "+mps"))
    assert "mps_clients: 2 of 2 GMIs seen by NVML as MPS clients" in text  # MPS inside the instances
    assert f"mig_instances: {sorted(m.uuid for m in gpu.migs)}" in out.read_text()


def test_a_failed_run_fails_the_check(tmp_path):
    gpu = fake_nvml.h100_80gb(0, mig=0)

    def runner(cmd, **kw):
        if "pytest" in cmd:
            return subprocess.CompletedProcess(cmd, 0, "1 passed\n", "")
        return subprocess.CompletedProcess(cmd, 1, "", "gmiexp: GMI 1 failed (exit code 1)\n")

    out = tmp_path / "gpu-check.md"
    assert gpu_check.main(["--out", str(out), "--runs", str(tmp_path / "r")], nvml=fake_nvml.make([gpu]),
                          runner=runner, which=lambda name: None) == 1
    assert "| tcg_ex-direct | failed | exit 1: gmiexp: GMI 1 failed (exit code 1) |" in out.read_text()
