"""make gpu-check: exits 2 without a GPU; on a (fake) GPU host runs the right matrix and writes its evidence."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from gmitest import cli_env, terminal_signals

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
    """Stands in for the subprocesses: pytest -m gpu, and each run writing what a real one writes.

    ``bad``: what goes wrong: ``not-mps`` (NVML lists one GMI only), ``reduction`` (the GMIs build another
    reduction than the plan's), ``exit2`` (every run exits 2), ``timeout`` (every run runs past its time),
    ``no-exploit`` (a population's exploit was not taken).
    """

    def __init__(self, gpu: fake_nvml.FakeGPU, bad: str = "") -> None:
        self.gpu, self.bad = gpu, bad
        self.cmds: list[list[str]] = []

    def __call__(self, cmd, **kw):
        self.cmds.append(cmd)
        if "pytest" in cmd:
            return subprocess.CompletedProcess(cmd, 0, "3 passed, 120 deselected in 41.0s\n", "")
        if self.bad == "timeout":
            raise subprocess.TimeoutExpired(cmd, kw["timeout"])
        if self.bad == "exit2":
            return subprocess.CompletedProcess(cmd, 2, "", "gmiexp: error: invalid backend.profile: '9g'\n")
        args = dict(a.split("=", 1) for a in cmd[3:])
        run = Path(args["hydra.run.dir"])
        if args.get("pbt") == "default":  # a population: each member a run, one exploit taken in place
            run.mkdir(parents=True)
            for m in (0, 1):
                self.write_run(run / "members" / str(m) / "life0", args, [41000 + 10 * m, 41001 + 10 * m])
            (run / "pbt").mkdir()
            taken = {} if self.bad == "no-exploit" else {"sha256": "ab" * 32, "seconds": 0.06}
            (run / "pbt" / "state.jsonl").write_text(json.dumps({"event": "exploited", "member": 1, "source": 0,
                                                                 **taken}) + "\n")
        else:
            self.write_run(run, args, [41000, 41001])
        return subprocess.CompletedProcess(cmd, 0, "gmiexp ok: ... env_steps/s=1,000\n", "")

    def write_run(self, run: Path, args: dict[str, str], pids: list[int]) -> None:
        mig = None
        if args["backend"] == "mig":
            mig = {"instances": [{"gmi": i, "uuid": m.uuid} for i, m in enumerate(self.gpu.migs)]}
        reduction = args.get("reduction", "allreduce")
        run.mkdir(parents=True)  # a run dir of an earlier check would raise here
        (run / "plan.yaml").write_text(yaml.safe_dump({"gmis": [{"id": 0}, {"id": 1}], "mig": mig,
                                                       "reduction": reduction, "trainer_group": [0, 1]}))
        built = "mpr" if self.bad == "reduction" and reduction != "mpr" else reduction
        for g, pid in enumerate(pids):
            (run / "gmis" / str(g)).mkdir(parents=True)
            (run / "gmis" / str(g) / "status.json").write_text(json.dumps({"gmi": g, "pid": pid, "reduction": built}))
        mps = "mps" in args["backend"] or args.get("backend.mps_in_mig") == "true"
        if mig:  # NVML lists each GMI inside its instance (an MPS client there too)
            for m, pid in zip(self.gpu.migs, pids, strict=False):
                m.procs = [(pid, 1 << 30)]
        elif mps:
            self.gpu.mps_procs = [(pid, 1 << 30) for pid in pids[: 1 if self.bad == "not-mps" else 2]]
        time.sleep(0.15)  # the NVML watch samples (every 0.03 s here) while the run trains
        self.gpu.mps_procs = []
        for m in self.gpu.migs:
            m.procs = []
        metrics = {"gmi/0/peak_mem_mb": 1234.0, "gmi/1/peak_mem_mb": 1300.0, "gmi/0/sm_util": 41.0}
        (run / "summary.json").write_text(json.dumps({"status": "ok", "metrics": metrics}))


FAST_KIT = ["--throughput-s", "0"]


@pytest.fixture(autouse=True)
def fast_sampling(monkeypatch):
    monkeypatch.setattr(gpu_check, "SAMPLE_S", 0.03)


def check(tmp_path: Path, gpu: fake_nvml.FakeGPU, bad: str = "", *extra: str) -> tuple[int, str, FakeRuns]:
    runs = FakeRuns(gpu, bad)
    out = tmp_path / "gpu-check.md"
    code = gpu_check.main(["--out", str(out), "--runs", str(tmp_path / "runs"), *FAST_KIT, *extra],
                          nvml=fake_nvml.make([gpu]), runner=runs, which=lambda name: f"/usr/bin/{name}")
    return code, out.read_text(), runs


def rows(text: str) -> dict[str, str]:
    return {ln.split(" | ")[0].lstrip("| "): ln.split(" | ")[1] for ln in text.splitlines()
            if ln.startswith("| ") and not ln.startswith("| run") and not ln.startswith("| ---")}


def test_mig_off_host_runs_the_kit_on_direct_and_mps(tmp_path):
    code, text, runs = check(tmp_path, fake_nvml.h100_80gb(0, mig=0))
    assert code == 0, text
    r = rows(text)
    for layout in LAYOUTS:
        if layout != "decoupled_async":
            assert r[f"{layout}-direct"] == r[f"{layout}-mps"] == "passed", text
        assert r[f"{layout}-mig"] == "not applicable"  # MIG is disabled on this H100
    assert r["decoupled_async-mps"] == "not applicable"
    assert "| decoupled_async-mps | not applicable | layout decoupled_async needs >= 2 GPUs; this host has 1 |" in text
    assert "MIG is disabled on GPU(s) [0] (sudo nvidia-smi -i <gpu> -mig 1 enables it" in text
    assert r["pbt-mps"] == "passed" and "exploits: 1 taken in place, 0.06s from decision to training" in text
    assert "member 1 life0 mps_clients: 2 of 2 GMIs seen by NVML as MPS clients" in text
    assert {k: v for k, v in r.items() if k.startswith("tcg_ex-mps-")} == {
        "tcg_ex-mps-mpr": "passed", "tcg_ex-mps-har": "passed", "tcg_ex-mps-allreduce": "passed",
        "tcg_ex-mps-device-cuda": "passed", "tcg_ex-mps-MjlabCartpole": "passed"}
    assert any("train.device=cuda" in c for c in runs.cmds) and any("task=MjlabCartpole" in c for c in runs.cmds)
    assert all("gmis_per_gpu=2" in c and "num_gpus=1" in c for c in runs.cmds if "pytest" not in c)
    assert "## gpu-marked tests: passed" in text and "3 passed, 120 deselected" in text
    assert "mps_clients: 2 of 2 GMIs seen by NVML as MPS clients" in text
    assert "reduction: plan har; trainer GMIs built ['har']" in text
    assert "gmi 0: peak 1234 MiB, SM 41%" in text and "gmi 1: peak 1300 MiB" in text


def test_mig_host_runs_mig_and_mps_inside_mig_and_sees_each_gmi_in_its_instance(tmp_path):
    gpu = fake_nvml.a100_40gb(0, mig=1, migs=fake_nvml.a100_migs())
    code, text, _ = check(tmp_path, gpu)
    assert code == 0, text
    r = rows(text)
    assert sorted(k for k, v in r.items() if v == "passed" and k.split("-")[0] in LAYOUTS and k.count("-") == 1) == \
        sorted(f"{layout}-mig{x}" for layout in LAYOUTS if layout != "decoupled_async" for x in ("", "+mps"))
    assert r["tcg_ex-direct"] == r["tcg_ex-mps"] == "not applicable"  # MIG on: no process uses a whole GPU
    assert "mig_placement: 2 of 2 GMIs seen by NVML inside their planned MIG instance" in text
    assert "mps_clients: 2 of 2 GMIs seen by NVML as MPS clients" in text  # MPS inside the instances
    assert f"mig_instances: {sorted(m.uuid for m in gpu.migs)}" in text
    assert "tcg_ex-mig+mps-mrr" not in r and r["tcg_ex-mig+mps-allreduce"] == "passed"  # no NCCL across MIG


def test_a_failed_run_fails_the_check(tmp_path):
    gpu = fake_nvml.h100_80gb(0, mig=0)

    def runner(cmd, **kw):
        if "pytest" in cmd:
            return subprocess.CompletedProcess(cmd, 0, "1 passed\n", "")
        return subprocess.CompletedProcess(cmd, 1, "", "gmiexp: GMI 1 failed (exit code 1)\n")

    out = tmp_path / "gpu-check.md"
    assert gpu_check.main(["--out", str(out), "--runs", str(tmp_path / "r"), *FAST_KIT], nvml=fake_nvml.make([gpu]),
                          runner=runner, which=lambda name: None) == 1
    assert "| tcg_ex-direct | failed | exit 1: gmiexp: GMI 1 failed (exit code 1) |" in out.read_text()


def test_a_second_check_into_the_same_runs_dir_runs_everything_again(tmp_path):
    """Each check writes fresh run dirs: a second one is no finished-run refusal turned "not applicable"."""
    gpu = fake_nvml.h100_80gb(0, mig=0)
    first = check(tmp_path, gpu, "", "--layouts", "tcg_ex")
    second = check(tmp_path, gpu, "", "--layouts", "tcg_ex")
    assert first[0] == second[0] == 0
    assert rows(first[1]) == rows(second[1])
    assert len({p.parent for p in (tmp_path / "runs").glob("*/tcg_ex-mps")}) == 2


def test_two_checks_in_one_second_write_apart(tmp_path, monkeypatch):
    """The runs dir's name carries the second it started in: two checks of one process in that second still get
    fresh dirs (a shared one made the second check meet the first's finished runs)."""
    monkeypatch.setattr(gpu_check.time, "strftime", lambda _fmt: "20261129-163000")
    gpu = fake_nvml.h100_80gb(0, mig=0)
    first, second = (check(tmp_path, gpu, "", "--layouts", "tcg_ex") for _ in range(2))
    assert first[0] == second[0] == 0, second[1]
    assert len({p.parent for p in (tmp_path / "runs").glob("20261129-163000-*/tcg_ex-mps")}) == 2


def test_exit_2_is_a_failure_with_its_message(tmp_path):
    code, text, _ = check(tmp_path, fake_nvml.h100_80gb(0, mig=0), "exit2", "--layouts", "tcg_ex")
    assert code == 1
    assert "| tcg_ex-mps | failed | exit 2: gmiexp: error: invalid backend.profile: '9g' |" in text


def test_a_gmi_not_seen_as_an_mps_client_fails_the_check(tmp_path):
    code, text, _ = check(tmp_path, fake_nvml.h100_80gb(0, mig=0), "not-mps", "--layouts", "tcg_ex")
    assert code == 1
    assert "| tcg_ex-mps | failed | no evidence: 1 of 2 GMIs seen by NVML as MPS clients |" in text
    assert rows(text)["tcg_ex-direct"] == "passed"


def test_a_population_whose_members_took_no_state_in_place_fails_the_check(tmp_path):
    code, text, _ = check(tmp_path, fake_nvml.h100_80gb(0, mig=0), "no-exploit", "--layouts", "tcg_ex")
    assert code == 1
    assert "| pbt-mps | failed | no evidence: no member took a leader's state in place |" in text
    assert rows(text)["tcg_ex-mps"] == "passed"


def test_a_gmi_that_built_another_reduction_fails_the_check(tmp_path):
    code, text, _ = check(tmp_path, fake_nvml.h100_80gb(0, mig=0), "reduction", "--layouts", "tcg_ex")
    assert code == 1
    want = "| tcg_ex-mps-har | failed | no evidence: reduction: the plan chose har, the GMIs built {0: 'mpr', 1: 'mpr'}"
    assert want in text
    assert rows(text)["tcg_ex-mps-mpr"] == "passed"


def test_a_run_that_times_out_is_a_failure_in_the_report(tmp_path):
    code, text, _ = check(tmp_path, fake_nvml.h100_80gb(0, mig=0), "timeout", "--timeout", "5", "--layouts", "tcg_ex")
    assert code == 1
    assert "| tcg_ex-mps | failed | timed out after 5 s (--timeout) |" in text


TRAINING = r"""
import json, sys, time, pathlib, yaml
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
run, k = pathlib.Path(args["hydra.run.dir"]), int(args["gmis_per_gpu"])
run.mkdir(parents=True)
(run / "plan.yaml").write_text(yaml.safe_dump({"gmis": [{"id": g} for g in range(k)]}))
t0, i = time.monotonic(), 0
while True:  # an epoch of 64 env steps per GMI every 0.05 s, until SIGINT
    i += 1
    for g in range(k):
        d = run / "gmis" / str(g)
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "history.jsonl", "a") as f:
            f.write(json.dumps({"iteration": i, "wall_s": time.monotonic() - t0, "local_frames": 64}) + "\n")
    time.sleep(0.05)
"""


def test_throughput_compares_1_and_2_gmis_per_gpu_as_a_ratio(tmp_path):
    def popen(cmd, **kw):  # SIGINT as a terminal has it: a suite started with `&` by a script inherits it ignored
        return subprocess.Popen([sys.executable, "-c", TRAINING, *cmd[3:]], preexec_fn=terminal_signals, **kw)

    status, detail, ev = gpu_check.throughput(tmp_path, ["task=Cartpole"], ["backend=mps"], 0.6, popen)
    assert status == "passed", detail
    assert detail.startswith("2 vs 1 GMIs per GPU: ") and detail.endswith("x env steps/s")
    assert ev["ratio"].endswith("x (2 GMIs per GPU / 1 GMI per GPU)")
    assert set(ev) == {"1 GMI(s) per GPU", "2 GMI(s) per GPU", "ratio"}
