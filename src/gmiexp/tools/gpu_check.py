"""``make gpu-check``: prove gmiexp's GPU paths on this host's real GPUs and write ``gpu-check.md``.

1. the ``gpu``-marked tests (``pytest -m gpu``);
2. a smoke matrix: every layout x every backend this host can run (direct and
   mps on GPUs with MIG off; mig, alone and with MPS inside instances, where
   MIG is enabled), 2 GMIs per GPU, a few iterations each;
3. evidence per run: NVML's view of MPS clients (sampled while the run
   trains), the MIG instance UUIDs the plan used, each GMI's peak device
   memory and SM utilisation (from the run's summary, measured by NVML per
   process).

On a host without a GPU it exits 2 and says so; it exits 1 when a check failed.

    python -m gmiexp.tools.gpu_check [--out gpu-check.md] [--task Cartpole] [--iterations 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from gmiexp.backends.mps_daemon import CONTROL
from gmiexp.hardware import Hardware, discover
from gmiexp.launch.status import gmi_pids
from gmiexp.layouts import LAYOUTS

ROOT = Path(__file__).resolve().parents[3]  # the repository (tests/ lives there)
Runner = Callable[..., subprocess.CompletedProcess]


@dataclass
class Case:
    """One smoke run: a layout on a backend (plus its extra overrides)."""

    layout: str
    backend: str
    overrides: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        extra = "+mps" if "backend.mps_in_mig=true" in self.overrides else ""
        return f"{self.layout}-{self.backend}{extra}"


@dataclass
class Outcome:
    case: Case
    status: str  # passed | failed | not applicable
    detail: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


def backends_for(hw: Hardware, which: Callable[[str], str | None] = shutil.which) -> list[list[str]]:
    """Backend overrides this host can run: direct/mps with MIG off, mig (and MPS inside it) with MIG on."""
    mig_on = any(g.mig_mode for g in hw.gpus)
    mps = which(CONTROL) is not None and min(g.compute_capability for g in hw.gpus) >= (7, 0)
    if mig_on:
        return [["backend=mig"]] + ([["backend=mig", "backend.mps_in_mig=true"]] if mps else [])
    return [["backend=direct"]] + ([["backend=mps"]] if mps else [])


def matrix(hw: Hardware, which: Callable[[str], str | None] = shutil.which) -> list[Case]:
    return [Case(layout, b[0].split("=")[1], b[1:]) for layout in LAYOUTS for b in backends_for(hw, which)]


class MPSClientWatch:
    """Samples NVML's MPS client list on the run's GPUs while it trains (evidence that MPS really serves)."""

    def __init__(self, nvml: ModuleType, gpus: list[int], interval_s: float = 0.5) -> None:
        self.nvml, self.gpus, self.interval_s = nvml, gpus, interval_s
        self.seen: dict[int, set[int]] = {g: set() for g in gpus}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-check-mps", daemon=True)

    def _loop(self) -> None:
        nv = self.nvml
        nv.nvmlInit()
        try:
            while not self._stop.wait(self.interval_s):
                for g in self.gpus:
                    try:
                        procs = nv.nvmlDeviceGetMPSComputeRunningProcesses(nv.nvmlDeviceGetHandleByIndex(g))
                    except nv.NVMLError:
                        continue
                    self.seen[g].update(int(p.pid) for p in procs)
        finally:
            nv.nvmlShutdown()

    def __enter__(self) -> MPSClientWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def evidence(run_dir: Path, mps_seen: dict[int, set[int]] | None) -> dict[str, Any]:
    """What the run's own files (and the MPS watch) show about how it used the GPUs."""
    out: dict[str, Any] = {}
    try:
        plan = yaml.safe_load((run_dir / "plan.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return out
    n = len(plan["gmis"])
    if plan.get("mig"):
        out["mig_instances"] = sorted({i["uuid"] for i in plan["mig"]["instances"]})
    if mps_seen is not None:
        pids = gmi_pids(run_dir, n)
        clients = set().union(*mps_seen.values()) if mps_seen else set()
        out["mps_clients"] = f"{len(set(pids.values()) & clients)} of {n} GMIs seen by NVML as MPS clients"
    try:
        metrics = json.loads((run_dir / "summary.json").read_text()).get("metrics", {})
    except (OSError, ValueError):
        metrics = {}
    for g in range(n):
        mem, util = metrics.get(f"gmi/{g}/peak_mem_mb"), metrics.get(f"gmi/{g}/sm_util")
        out[f"gmi {g}"] = (f"peak {mem:.0f} MiB" if mem is not None else "peak memory not reported") + \
            (f", SM {util:.0f}%" if util is not None else "")
    return out


def run_case(case: Case, out_dir: Path, common: list[str], nvml: ModuleType | None, hw: Hardware,
             runner: Runner = subprocess.run) -> Outcome:
    run_dir = out_dir / case.name
    cmd = [sys.executable, "-m", "gmiexp", f"layout={case.layout}", f"backend={case.backend}", *case.overrides,
           *common, f"hydra.run.dir={run_dir}"]
    gpus = [g.index for g in hw.gpus]
    watch = MPSClientWatch(nvml, gpus) if nvml is not None and "mps" in case.name else None
    t0 = time.perf_counter()
    with watch or contextlib.nullcontext():
        res = runner(cmd, capture_output=True, text=True, timeout=900, check=False)
    wall = time.perf_counter() - t0
    ev = evidence(run_dir, watch.seen if watch else None)
    if res.returncode == 2:  # refused before launch: this layout cannot run on this host's GPUs
        return Outcome(case, "not applicable", _last(res.stderr), ev)
    if res.returncode != 0:
        return Outcome(case, "failed", f"exit {res.returncode}: {_last(res.stderr)}", ev)
    return Outcome(case, "passed", f"{wall:.0f}s: {_last(res.stdout)}", ev)


def _last(text: str) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def gpu_tests(runner: Runner = subprocess.run) -> tuple[str, str]:
    """(status, pytest's last line) of the ``gpu``-marked tests."""
    if not (ROOT / "tests").is_dir():
        return "not applicable", "tests/ is not next to this installation"
    res = runner([sys.executable, "-m", "pytest", "-q", "-m", "gpu", str(ROOT / "tests")], cwd=ROOT,
                 capture_output=True, text=True, timeout=1800, check=False)
    return ("passed" if res.returncode == 0 else "failed"), _last(res.stdout)


def report(hw: Hardware, tests: tuple[str, str], outcomes: list[Outcome]) -> str:
    lines = ["# gmiexp gpu-check", "", f"Host: {hw.describe()}; driver {hw.driver_version}, CUDA {hw.cuda_version}.",
             ""]
    for g in hw.gpus:
        mig = {None: "not supported", True: "enabled", False: "disabled"}[g.mig_mode]
        lines.append(f"* GPU {g.index}: {g.name}, cc {g.cc}, {g.memory_mb} MiB, MIG {mig}, {g.uuid}")
    lines += ["", f"## gpu-marked tests: {tests[0]}", "", f"    {tests[1]}", "",
              "## Smoke matrix (2 GMIs per GPU)", "", "| run | result | detail |", "| --- | --- | --- |"]
    lines += [f"| {o.case.name} | {o.status} | {o.detail.replace('|', '/')} |" for o in outcomes]
    lines += ["", "## Evidence", ""]
    for o in outcomes:
        lines.append(f"### {o.case.name}")
        lines += [f"* {k}: {v}" for k, v in o.evidence.items()] or ["* (no run files)"]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None, nvml: ModuleType | None = None, runner: Runner = subprocess.run,
         which: Callable[[str], str | None] = shutil.which) -> int:
    ap = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="gpu-check.md", help="report file (default gpu-check.md)")
    ap.add_argument("--runs", default="outputs/gpu-check", help="where the smoke runs write their run dirs")
    ap.add_argument("--task", default="Cartpole", help="task of the smoke runs (default Cartpole)")
    ap.add_argument("--iterations", type=int, default=3, help="PPO iterations per smoke run (>= 1)")
    ap.add_argument("--num-envs", type=int, default=256, help="environments per GMI")
    args = ap.parse_args(argv)
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            nvml = None
    hw = discover(nvml)
    if not hw.has_gpu:
        print(f"gpu-check: this host has no NVIDIA GPU ({hw.describe()}); gpu-check needs one. "
              "Use `make test` here, or `python -m gmiexp mode=plan hardware=h100x8` to plan for one.",
              file=sys.stderr)
        return 2
    tests = gpu_tests(runner)
    common = [f"task={args.task}", f"num_gpus={len(hw.gpus)}", "gmis_per_gpu=2", f"num_envs={args.num_envs}",
              f"max_iterations={args.iterations}", "launch.progress=false", "logger=none"]
    outcomes = []
    for case in matrix(hw, which):
        o = run_case(case, Path(args.runs), common, nvml, hw, runner)
        print(f"gpu-check: {case.name}: {o.status}", file=sys.stderr, flush=True)
        outcomes.append(o)
    Path(args.out).write_text(report(hw, tests, outcomes))
    failed = tests[0] == "failed" or any(o.status == "failed" for o in outcomes)
    print(f"gpu-check: {'FAILED' if failed else 'ok'}; report in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
