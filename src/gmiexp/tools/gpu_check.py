"""``make gpu-check``: prove gmiexp's GPU paths on this host's real GPUs and write ``gpu-check.md``.

1. the ``gpu``-marked tests (``pytest -m gpu``);
2. the kit, every run into a fresh run dir of its own (``<runs>/<stamp>/<case>``):
   * every layout x every backend (direct, mps, mig, mig with MPS inside instances), 2 GMIs per GPU;
   * every reduction that can serve tcg_ex on these GPUs (MRR and HAR build NCCL groups with > 1 GPU);
   * ``train.device=cuda``, and an mjlab task (MuJoCo Warp on the GPU);
   * a population (``pbt=default``, 2 members packed on the GPUs) whose underperformer takes the leader's state
     in place every interval: the state of a GPU-trained policy through shared memory into a live member;
   * throughput: tcg_ex with 1, then 2 GMIs per GPU, ``--throughput-s`` seconds each (2 minutes), as a ratio;
3. a run passes only on evidence: it exited 0, NVML saw every GMI where the plan put it (an MPS client of
   its GPU's daemon; a process inside its MIG instance), and every trainer GMI built the reduction the plan
   chose (its ``status.json``); a population's members each so, and an exploit taken in place. Any other exit,
   2 included, and a run past ``--timeout`` fail, with their message; "not applicable" is only what this host
   cannot have (MIG on a GPU without MIG, a layout that needs more GPUs), and says why.

On a host without a GPU it exits 2 and says so; it exits 1 when a check failed. The report is always written.

    python -m gmiexp.tools.gpu_check [--out gpu-check.md] [--task Cartpole] [--iterations 3] [--throughput-s 120]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from gmiexp.backends.mps_daemon import CONTROL
from gmiexp.hardware import Hardware, discover
from gmiexp.layouts import LAYOUTS
from gmiexp.stats import steady_rate
from gmiexp.status import gmi_pids, read_history, read_jsonl, read_status

ROOT = Path(__file__).resolve().parents[3]  # the repository (tests/ lives there)
Runner = Callable[..., subprocess.CompletedProcess]
#: layouts that need GPUs of their own for two roles (serving and training GPUs)
MIN_GPUS = {"decoupled_async": 2}
SAMPLE_S = 0.1  # NVML sampling interval while a run trains: a GMI of a 3-iteration case is an MPS client for ~1 s
BACKENDS = {"direct": ["backend=direct"], "mps": ["backend=mps"], "mig": ["backend=mig"],
            "mig+mps": ["backend=mig", "backend.mps_in_mig=true"]}


@dataclass
class Case:
    """One run of the kit: its name, overrides, and why it cannot run on this host (None: it can)."""

    name: str
    overrides: list[str] = field(default_factory=list)
    not_applicable: str | None = None
    backend: str = "direct"
    population: bool = False  # a pbt run: its members' run dirs are the evidence (members/<m>/life<k>)

    @property
    def layout(self) -> str:
        return next((o.split("=", 1)[1] for o in self.overrides if o.startswith("layout=")), "tcg_ex")


@dataclass
class Outcome:
    case: Case
    status: str  # passed | failed | not applicable
    detail: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


def backend_limits(hw: Hardware, which: Callable[[str], str | None] = shutil.which) -> dict[str, str | None]:
    """Per backend of :data:`BACKENDS`, why this host cannot run it (None: it can)."""
    gpus = hw.gpus
    no_mig = [g for g in gpus if g.mig_mode is None]
    mig_off = [g for g in gpus if g.mig_mode is False]
    mig_on = [g for g in gpus if g.mig_mode]
    low = [g for g in gpus if g.compute_capability < (7, 0)]
    whole = f"MIG is enabled on GPU(s) {[g.index for g in mig_on]}: no process can use a whole GPU" if mig_on else None
    no_control = None if which(CONTROL) else f"{CONTROL} is not on PATH (it ships with the NVIDIA driver)"
    old = f"MPS needs compute capability >= 7.0; GPU(s) {[g.index for g in low]} have less" if low else None
    mps = whole or old or no_control
    mig = (f"{no_mig[0].name} (GPU {no_mig[0].index}) has no MIG" if no_mig else None) or \
        (f"MIG is disabled on GPU(s) {[g.index for g in mig_off]} (sudo nvidia-smi -i <gpu> -mig 1 enables it; "
         "rerun gpu-check to check MIG)" if mig_off else None)
    return {"direct": whole, "mps": mps, "mig": mig, "mig+mps": mig or no_control}


def whole_gpu_backend(limits: dict[str, str | None]) -> str:
    """The backend the non-smoke cases run on: MPS where it can, else MPS inside MIG, mig, direct."""
    return next((b for b in ("mps", "mig+mps", "mig", "direct") if limits[b] is None), "direct")


def reductions_for(n_gpus: int, gmis_per_gpu: int, backend: str) -> list[str]:
    """The strategies that serve tcg_ex with ``gmis_per_gpu`` GMIs on each of ``n_gpus`` GPUs (as resolve checks)."""
    out = ["mpr"] if n_gpus == 1 else []
    if gmis_per_gpu <= n_gpus:
        out.append("mrr")
    out += ["har", "allreduce"]
    return [r for r in out if not (backend.startswith("mig") and r in ("mrr", "har"))]  # NCCL cannot join MIG


def kit(hw: Hardware, args: argparse.Namespace, which: Callable[[str], str | None] = shutil.which) -> list[Case]:
    """Every run of the check, with "not applicable" decided from the host's facts alone."""
    limits = backend_limits(hw, which)
    n = len(hw.gpus)
    cases = []
    for layout in [x for x in LAYOUTS if not args.layouts or x in args.layouts]:
        need = MIN_GPUS.get(layout, 1)
        for b, over in BACKENDS.items():
            why = limits[b] or (f"layout {layout} needs >= {need} GPUs; this host has {n}" if n < need else None)
            cases.append(Case(f"{layout}-{b}", [f"layout={layout}", *over], why, b))
    main = whole_gpu_backend(limits)
    over = BACKENDS[main]
    cases += [Case(f"tcg_ex-{main}-{r}", ["layout=tcg_ex", *over, f"reduction={r}"], None, main)
              for r in reductions_for(n, 2, main)]
    cases.append(Case(f"{args.device_layout}-{main}-device-{args.device}",
                      [f"layout={args.device_layout}", *over, f"train.device={args.device}"], None, main))
    # every interval an epoch, thresholds 0: the member behind takes the leader's state at each interval's end,
    # from the first with a return (a member's objective); 6 epochs at least, so some episodes have ended
    cases.append(Case(f"pbt-{main}", ["layout=tcg_ex", *over, "num_gpus=1", f"max_iterations={max(6, args.iterations)}",
                                      "pbt=default", "pbt.population=2", "pbt.interval_steps=1",
                                      "pbt.threshold_std=0", "pbt.threshold_abs=0"], None, main, population=True))
    if args.mjlab_task:
        cases.append(Case(f"tcg_ex-{main}-{args.mjlab_task}", ["layout=tcg_ex", *over, f"task={args.mjlab_task}"],
                          None, main))
    return cases


class NVMLWatch:
    """Samples NVML while a run trains: MPS clients per GPU, processes per MIG instance (by UUID)."""

    def __init__(self, nvml: ModuleType | None, gpus: list[int], interval_s: float | None = None) -> None:
        self.nvml, self.gpus, self.interval_s = nvml, gpus, SAMPLE_S if interval_s is None else interval_s
        self.mps: set[int] = set()
        self.mig: dict[str, set[int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-check-nvml", daemon=True)

    def _sample(self) -> None:
        nv = self.nvml
        for g in self.gpus:
            try:
                h = nv.nvmlDeviceGetHandleByIndex(g)
                self.mps.update(int(p.pid) for p in nv.nvmlDeviceGetMPSComputeRunningProcesses(h))
            except nv.NVMLError:
                continue
            for i in range(nv.nvmlDeviceGetMaxMigDeviceCount(h)):
                try:
                    m = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, i)
                    uuid = nv.nvmlDeviceGetUUID(m)
                    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
                    self.mig.setdefault(uuid, set()).update(
                        int(p.pid) for p in nv.nvmlDeviceGetComputeRunningProcesses(m))
                except nv.NVMLError:
                    continue

    def _loop(self) -> None:
        if self.nvml is None:
            return
        self.nvml.nvmlInit()
        try:
            while not self._stop.wait(self.interval_s):
                self._sample()
        finally:
            self.nvml.nvmlShutdown()

    def __enter__(self) -> NVMLWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def evidence(run_dir: Path, watch: NVMLWatch, backend: str) -> tuple[dict[str, Any], list[str]]:
    """What the run's files and NVML show, and what is missing for the run to pass."""
    out: dict[str, Any] = {}
    try:
        plan = yaml.safe_load((run_dir / "plan.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return out, ["no plan.yaml in the run dir"]
    missing: list[str] = []
    gmis = plan["gmis"]
    pids = gmi_pids(run_dir, len(gmis))
    if backend in ("mps", "mig+mps"):
        seen = [g["id"] for g in gmis if pids.get(g["id"]) in watch.mps or _in_mig(pids.get(g["id"]), watch)]
        out["mps_clients"] = f"{len(seen)} of {len(gmis)} GMIs seen by NVML as MPS clients"
        if len(seen) < len(gmis):
            missing.append(out["mps_clients"])
    if plan.get("mig"):
        where = {i["gmi"]: i["uuid"] for i in plan["mig"]["instances"]}
        out["mig_instances"] = sorted(set(where.values()))
        inside = [g for g, u in where.items() if pids.get(g) in watch.mig.get(u, set())]
        out["mig_placement"] = f"{len(inside)} of {len(where)} GMIs seen by NVML inside their planned MIG instance"
        if len(inside) < len(where):
            missing.append(out["mig_placement"])
    chosen = plan.get("reduction")
    built = {g: (read_status(run_dir, g) or {}).get("reduction") for g in plan.get("trainer_group", [])}
    out["reduction"] = f"plan {chosen}; trainer GMIs built {sorted({str(b) for b in built.values()})}"
    if built and any(b != chosen for b in built.values()):
        missing.append(f"reduction: the plan chose {chosen}, the GMIs built {built}")
    try:
        metrics = json.loads((run_dir / "summary.json").read_text()).get("metrics", {})
    except (OSError, ValueError):
        metrics = {}
    for g in range(len(gmis)):
        mem, util = metrics.get(f"gmi/{g}/peak_mem_mb"), metrics.get(f"gmi/{g}/sm_util")
        out[f"gmi {g}"] = (f"peak {mem:.0f} MiB" if mem is not None else "peak memory not reported") + \
            (f", SM {util:.0f}%" if util is not None else "")
    return out, missing


def population_evidence(run_dir: Path, watch: NVMLWatch, backend: str) -> tuple[dict[str, Any], list[str]]:
    """Each member's run as :func:`evidence` reads a run, and the exploits its members took in place."""
    lives = sorted((run_dir / "members").glob("*/life*"))
    if not lives:
        return {}, ["no member ran (no members/<m>/life<k> in the run dir)"]
    out: dict[str, Any] = {}
    missing: list[str] = []
    for life in lives:
        name = f"member {life.parent.name} {life.name}"
        ev, miss = evidence(life, watch, backend)
        out.update({f"{name} {k}": v for k, v in ev.items()})
        missing += [f"{name}: {m}" for m in miss]
    taken = [e for e in read_jsonl(run_dir / "pbt" / "state.jsonl") if e.get("event") == "exploited"
             and e.get("sha256")]  # acknowledged by the member's GMI 0 with the bytes it read
    out["exploits"] = (f"{len(taken)} taken in place, " +
                       ", ".join(f"{float(e['seconds']):.2f}s" for e in taken) + " from decision to training"
                       if taken else "none taken in place")
    if not taken:
        missing.append("no member took a leader's state in place")
    return out, missing


def _in_mig(pid: int | None, watch: NVMLWatch) -> bool:
    """Inside a MIG instance NVML lists an MPS client among the instance's compute processes."""
    return pid is not None and any(pid in pids for pids in watch.mig.values())


def run_case(case: Case, runs: Path, common: list[str], nvml: ModuleType | None, hw: Hardware,
             runner: Runner = subprocess.run, timeout_s: float = 900) -> Outcome:
    if case.not_applicable:
        return Outcome(case, "not applicable", case.not_applicable)
    run_dir = runs / case.name
    cmd = [sys.executable, "-m", "gmiexp", *common, *case.overrides, f"hydra.run.dir={run_dir}"]
    t0 = time.perf_counter()
    with NVMLWatch(nvml, [g.index for g in hw.gpus]) as watch:
        try:
            res = runner(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            res = None
    wall = time.perf_counter() - t0
    ev, missing = (population_evidence if case.population else evidence)(run_dir, watch, case.backend)
    if res is None:
        return Outcome(case, "failed", f"timed out after {timeout_s:g} s (--timeout)", ev)
    if res.returncode != 0:
        return Outcome(case, "failed", f"exit {res.returncode}: {_last(res.stderr)}", ev)
    if missing:
        return Outcome(case, "failed", "no evidence: " + "; ".join(missing), ev)
    return Outcome(case, "passed", f"{wall:.0f}s: {_last(res.stdout)}", ev)


def throughput(runs: Path, common: list[str], over: list[str], seconds: float,
               popen: Callable[..., subprocess.Popen] = subprocess.Popen,
               start_s: float = 900) -> tuple[str, str, dict[str, Any]]:
    """tcg_ex with 1 then 2 GMIs per GPU, ``seconds`` of training each: (status, detail, evidence) with the ratio.

    Timed from every GMI's first epoch, so start-up is not counted; ``start_s`` bounds the start-up.
    """
    rates: dict[int, float] = {}
    for k in (1, 2):
        run_dir = runs / f"throughput-{k}-per-gpu"
        cmd = [sys.executable, "-m", "gmiexp", *common, "layout=tcg_ex", *over, f"gmis_per_gpu={k}",
               "max_iterations=1000000", f"hydra.run.dir={run_dir}"]
        p = popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.monotonic() + start_s
        while time.monotonic() < deadline and p.poll() is None and not trained(run_dir):
            time.sleep(0.2)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)
        rates[k] = env_steps_per_s(run_dir)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)  # the launcher stops its GMIs and cleans up (exit 130)
        try:
            _, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate()
        if p.returncode not in (0, 130, -signal.SIGINT):
            return "failed", f"{k} GMI(s) per GPU: exit {p.returncode}: {_last(err)}", {}
    ev = {f"{k} GMI(s) per GPU": f"{r:,.0f} env steps/s over {seconds:g} s" for k, r in rates.items()}
    if not all(rates.values()):
        return "failed", "no training epoch finished in the time given (--throughput-s)", ev
    ratio = rates[2] / rates[1]
    ev["ratio"] = f"{ratio:.2f}x (2 GMIs per GPU / 1 GMI per GPU)"
    return "passed", f"2 vs 1 GMIs per GPU: {ratio:.2f}x env steps/s", ev


def trained(run_dir: Path) -> bool:
    """Every GMI of the run finished its first epoch (wrote a history row)."""
    try:
        n = len(yaml.safe_load((run_dir / "plan.yaml").read_text())["gmis"])
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return False
    return all(read_history(run_dir, g) for g in range(n))


def env_steps_per_s(run_dir: Path) -> float:
    """The run's env steps per second so far, as its summary counts them (steady rate summed over GMIs)."""
    try:
        n = len(yaml.safe_load((run_dir / "plan.yaml").read_text())["gmis"])
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return 0.0
    histories = [read_history(run_dir, g) for g in range(n)]
    if any(len(rows) < 2 for rows in histories):  # one epoch past the warm-up, on every GMI
        return 0.0
    return sum(steady_rate(rows, "local_frames", cumulative=False) for rows in histories)


def _last(text: str | None) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def gpu_tests(runner: Runner = subprocess.run, where: str | None = None, timeout_s: float = 1800) -> tuple[str, str]:
    """(status, pytest's last line) of the ``gpu``-marked tests (``where=""``: not run, as asked)."""
    if where == "":
        return "not run", "--gpu-tests '' (the rehearsal on fake GPUs: the gpu-marked tests need real ones)"
    target = Path(where) if where else ROOT / "tests"
    if not target.exists():
        return "not applicable", f"{target} is not next to this installation"
    try:
        res = runner([sys.executable, "-m", "pytest", "-q", "-m", "gpu", str(target)], cwd=ROOT,
                     capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return "failed", f"timed out after {timeout_s:g} s"
    if res.returncode == 5:  # pytest: nothing collected
        return "failed", f"no gpu-marked tests in {target}"
    return ("passed" if res.returncode == 0 else "failed"), _last(res.stdout)


def report(hw: Hardware, tests: tuple[str, str], outcomes: list[Outcome], runs: Path) -> str:
    lines = ["# gmiexp gpu-check", "", f"Host: {hw.describe()}; driver {hw.driver_version}, CUDA {hw.cuda_version}.",
             f"Run dirs: {runs}", ""]
    for g in hw.gpus:
        mig = {None: "not supported", True: "enabled", False: "disabled"}[g.mig_mode]
        lines.append(f"* GPU {g.index}: {g.name}, cc {g.cc}, {g.memory_mb} MiB, MIG {mig}, {g.uuid}")
    lines += ["", f"## gpu-marked tests: {tests[0]}", "", f"    {tests[1]}", "",
              "## Kit (2 GMIs per GPU)", "", "| run | result | detail |", "| --- | --- | --- |"]
    lines += [f"| {o.case.name} | {o.status} | {o.detail.replace('|', '/')} |" for o in outcomes]
    lines += ["", "## Evidence", ""]
    for o in outcomes:
        if o.status == "not applicable":
            continue
        lines.append(f"### {o.case.name}")
        lines += [f"* {k}: {v}" for k, v in o.evidence.items()] or ["* (no run files)"]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None, nvml: ModuleType | None = None, runner: Runner = subprocess.run,
         which: Callable[[str], str | None] = shutil.which,
         popen: Callable[..., subprocess.Popen] = subprocess.Popen) -> int:
    ap = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="gpu-check.md", help="report file (default gpu-check.md)")
    ap.add_argument("--runs", default="outputs/gpu-check", help="where each check writes a fresh dir of run dirs")
    ap.add_argument("--task", default="Cartpole", help="task of the runs (default Cartpole)")
    ap.add_argument("--iterations", type=int, default=3, help="PPO iterations per run (>= 1)")
    ap.add_argument("--num-envs", type=int, default=256, help="environments per GMI")
    ap.add_argument("--timeout", type=float, default=900, help="seconds a run may take before it fails")
    ap.add_argument("--throughput-s", type=float, default=120, help="seconds per throughput run (0: skip)")
    ap.add_argument("--device", default="cuda", help="train.device of the device case (default cuda)")
    ap.add_argument("--device-layout", default="tcg_ex", help="layout of the device case (default tcg_ex)")
    ap.add_argument("--mjlab-task", default="MjlabCartpole", help="the mjlab task run (empty: none)")
    ap.add_argument("--layouts", nargs="*", default=None, help="layouts of the smoke runs (default: all)")
    ap.add_argument("--cases", nargs="*", default=None, help="only the runs whose names match these globs")
    ap.add_argument("--gpu-tests", default=None, help="tests to run with -m gpu (default: the repository's)")
    ap.add_argument("--extra", nargs="*", default=[], help="overrides added to every run")
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
    root = Path(args.runs).absolute()
    root.mkdir(parents=True, exist_ok=True)  # fresh every check, two of one process in one second included
    runs = Path(tempfile.mkdtemp(prefix=f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-", dir=root))
    outcomes: list[Outcome] = []
    tests = ("failed", "interrupted before the tests ran")
    try:
        tests = gpu_tests(runner, args.gpu_tests)
        common = [f"task={args.task}", f"num_gpus={len(hw.gpus)}", "gmis_per_gpu=2", f"num_envs={args.num_envs}",
                  f"max_iterations={args.iterations}", "launch.progress=false", "logger=none", *args.extra]
        for case in [c for c in kit(hw, args, which) if not args.cases or any(fnmatch(c.name, p) for p in args.cases)]:
            o = run_case(case, runs, common, nvml, hw, runner, args.timeout)
            print(f"gpu-check: {case.name}: {o.status} {o.detail[:200]}", file=sys.stderr, flush=True)
            outcomes.append(o)
        if args.throughput_s > 0:
            main_b = whole_gpu_backend(backend_limits(hw, which))
            status, detail, ev = throughput(runs, [c for c in common if not c.startswith(("gmis_per_gpu=",
                                                                                          "max_iterations="))],
                                            BACKENDS[main_b], args.throughput_s, popen, args.timeout)
            outcomes.append(Outcome(Case(f"throughput-1-vs-2-{main_b}", backend=main_b), status, detail, ev))
            print(f"gpu-check: throughput: {status} {detail}", file=sys.stderr, flush=True)
    finally:  # the report is written whatever happened
        Path(args.out).write_text(report(hw, tests, outcomes, runs))
    failed = tests[0] == "failed" or any(o.status == "failed" for o in outcomes)
    print(f"gpu-check: {'FAILED' if failed else 'ok'}; report in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
