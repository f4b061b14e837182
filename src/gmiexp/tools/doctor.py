"""``mode=doctor``: what this host offers for GMIs, and which backends can run here and why.

``doctor()`` gathers a plain dict (easy to test and to dump as JSON);
``format_doctor()`` turns it into the text the CLI prints.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gmiexp.backends.auto import choose
from gmiexp.backends.mps_daemon import CONTROL, SYSTEM_PIPE_DIR, pid_of
from gmiexp.errors import ConfigError
from gmiexp.hardware import Hardware, discover

Which = Callable[[str], "str | None"]
Installed = Callable[[str], bool]

#: Isaac Gym segfaults on compute capability 9.x (IsaacGymEnvs issue 220, open).
HOPPER = (9, 0)
MJLAB_TASKS = "task=Go1, task=G1, task=MjlabCartpole"


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def nccl_status() -> dict[str, Any]:
    """Whether torch was built with NCCL (never true for CPU wheels), and its version."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        return {"available": False, "version": "", "reason": f"torch not importable ({e})"}
    if not dist.is_available() or not dist.is_nccl_available():
        return {"available": False, "version": "",
                "reason": f"torch {torch.__version__} was built without NCCL (gloo only)"}
    try:
        v = torch.cuda.nccl.version()
        version = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception as e:  # noqa: BLE001 - NCCL present but no CUDA runtime
        version = f"unknown ({e})"
    return {"available": True, "version": version, "reason": "torch.distributed.is_nccl_available()"}


def mps_daemon_status(pipe_dir: str | None = None) -> dict[str, Any]:
    """A control daemon answering at CUDA_MPS_PIPE_DIRECTORY (or /tmp/nvidia-mps), by its pid file."""
    pipe_dir = pipe_dir or os.environ.get("CUDA_MPS_PIPE_DIRECTORY", SYSTEM_PIPE_DIR)
    pid = pid_of(pipe_dir)
    return {"running": pid is not None, "pid": pid, "pipe_dir": pipe_dir}


def backend_verdicts(hw: Hardware, which: Which = shutil.which) -> dict[str, dict[str, Any]]:
    """For each backend: can it run on this host, and why (not)."""
    mps_binary = which(CONTROL)
    out: dict[str, dict[str, Any]] = {"direct": {"ok": True, "reason": "always available"}}
    if not hw.has_gpu:
        out["mps"] = {"ok": False, "reason": "no NVIDIA GPU"}
        out["mig"] = {"ok": False, "reason": "no NVIDIA GPU"}
    else:
        low = min(hw.gpus, key=lambda g: g.compute_capability)
        cc = ".".join(map(str, low.compute_capability))
        if low.compute_capability < (7, 0):
            out["mps"] = {"ok": False, "reason": f"GPU {low.index} has compute capability {cc} < 7.0"}
        elif mps_binary is None:
            out["mps"] = {"ok": False, "reason": f"{CONTROL} not on PATH"}
        else:
            on = [g.index for g in hw.gpus if g.mig_mode]
            inside = (f"; GPU(s) {on} have MIG enabled: MPS only inside instances (backend=mig "
                      "backend.mps_in_mig=true)") if on else ""
            out["mps"] = {"ok": True,
                          "reason": f"compute capability >= 7.0 and {mps_binary}{inside}"}
        out["mig"] = _mig_verdict(hw)
    try:
        train = choose("tcg_ex", hw, which=which)
        serve = choose("tcg", hw, which=which)
    except ConfigError as e:  # GPUs with MIG on and off
        out["auto"] = {"ok": False, "reason": str(e)}
        return out
    why = f"training -> {train.reason}" if train == serve else \
        f"training -> {train.reason}; serving -> {serve.reason}"
    out["auto"] = {"ok": True, "reason": why}
    return out


def simulator_verdicts(hw: Hardware, have: Installed = installed) -> dict[str, Any]:
    """Which simulators can run here, and the one to use: mjlab on Hopper, where Isaac Gym cannot run."""
    hopper = [g for g in hw.gpus if g.compute_capability >= HOPPER]
    out: dict[str, Any] = {"envpool": {"ok": have("envpool"),
                                       "reason": "C++ MuJoCo on the host CPU (task=Ant, task=Humanoid)"}}
    if not have("mjlab"):
        out["mjlab"] = {"ok": False, "reason": "not installed: pip install 'gmiexp[mjlab]' with the installed "
                                               "torch pinned (make venv does)"}
    elif hw.has_gpu:
        out["mjlab"] = {"ok": True, "reason": f"MuJoCo Warp on each GMI's GPU ({MJLAB_TASKS})"}
    else:
        out["mjlab"] = {"ok": True, "reason": "MuJoCo Warp on CPU: runs, slowly (its point is the GPU)"}
    if hopper:
        g = hopper[0]
        cc = ".".join(map(str, g.compute_capability))
        out["isaacgym"] = {"ok": False, "reason": f"does not run on GPU {g.index} ({g.name}, compute capability "
                                                  f"{cc}): IsaacGymEnvs issue 220"}
    elif not have("isaacgym"):
        out["isaacgym"] = {"ok": False, "reason": "not installed (Isaac Gym Preview 4: manual download, Python <= 3.8)"}
    else:
        out["isaacgym"] = {"ok": hw.has_gpu, "reason": "the paper's simulator" if hw.has_gpu else "needs a GPU"}
    if hw.has_gpu and (hopper or not out["isaacgym"]["ok"]) and out["mjlab"]["ok"]:
        pick = f"mjlab ({MJLAB_TASKS})" + (" over Isaac Gym, which does not run on Hopper" if hopper else "")
    elif hw.has_gpu and out["isaacgym"]["ok"]:
        pick = "isaacgym (task=IsaacAnt, ...)"
    elif hw.has_gpu:
        pick = "mjlab, once installed: pip install 'gmiexp[mjlab]'"
    else:
        pick = "envpool (task=Ant, task=Humanoid) or the torch-native task=Cartpole on a CPU-only host"
    out["recommended"] = pick
    return out


def _mig_verdict(hw: Hardware) -> dict[str, Any]:
    bad = [g for g in hw.gpus if g.compute_capability < (8, 0)]
    if bad:
        return {"ok": False, "reason": f"GPU {bad[0].index} ({bad[0].name}) has compute capability < 8.0"}
    unsupported = [g.index for g in hw.gpus if g.mig_mode is None]
    if unsupported:
        return {"ok": False, "reason": f"GPU(s) {unsupported} do not support MIG"}
    off = [g.index for g in hw.gpus if not g.mig_mode]
    if off:
        return {"ok": False,
                "reason": f"MIG disabled on GPU(s) {off}; enable: sudo nvidia-smi -i {off[0]} -mig 1"}
    n = sum(len(g.mig_devices) for g in hw.gpus)
    return {"ok": True, "reason": f"MIG enabled on every GPU; {n} MIG device(s) exist"}


def doctor(nvml: ModuleType | None = None, which: Which = shutil.which,
           nccl: Callable[[], dict[str, Any]] = nccl_status, pipe_dir: str | None = None,
           have: Installed = installed) -> dict[str, Any]:
    """Everything ``mode=doctor`` reports, as a dict."""
    hw = discover(nvml)
    mps_binary = which(CONTROL)
    return {
        "host": {"cpu_count": hw.cpu_count, "source": hw.source, "note": hw.note},
        "driver_version": hw.driver_version,
        "cuda_version": hw.cuda_version,
        "gpus": [_gpu_row(g) for g in hw.gpus],
        "tools": {CONTROL: mps_binary, "nvidia-smi": which("nvidia-smi")},
        "nccl": nccl(),
        "mps_daemon": mps_daemon_status(pipe_dir),
        "backends": backend_verdicts(hw, which),
        "simulators": simulator_verdicts(hw, have),
    }


def _gpu_row(g: Any) -> dict[str, Any]:
    return {"index": g.index, "name": g.name, "uuid": g.uuid,
            "compute_capability": ".".join(map(str, g.compute_capability)), "memory_mb": g.memory_mb,
            "mig_mode": {None: "unsupported", True: "enabled", False: "disabled"}[g.mig_mode],
            "compute_mode": g.compute_mode,
            "mig_devices": [{"index": d.index, "profile": d.profile, "uuid": d.uuid, "memory_mb": d.memory_mb}
                            for d in g.mig_devices]}


def _mode_note(mode: str) -> str:
    """A compute mode other than default, with what it admits (``backends.common.check_compute_modes``)."""
    says = {"exclusive_process": "one process: several GMIs through MPS only",
            "exclusive_thread": "one process: several GMIs through MPS only", "prohibited": "no process"}
    return f", compute mode {mode.upper()} ({says[mode]})" if mode in says else ""


def format_doctor(report: dict[str, Any]) -> str:
    """Human-readable doctor report, one fact per line."""
    lines = ["gmiexp doctor"]
    h = report["host"]
    lines.append(f"  host: {h['cpu_count']} CPU cores; hardware source {h['source']}"
                 + (f" ({h['note']})" if h["note"] else ""))
    lines.append(f"  driver: {report['driver_version'] or 'none'}; CUDA (driver API): "
                 f"{report['cuda_version'] or 'none'}")
    if not report["gpus"]:
        lines.append("  GPUs: none")
    for g in report["gpus"]:
        lines.append(f"  GPU {g['index']}: {g['name']}, cc {g['compute_capability']}, {g['memory_mb']} MiB, "
                     f"MIG {g['mig_mode']}" + _mode_note(g["compute_mode"]))
        for d in g["mig_devices"]:
            lines.append(f"    MIG {d['index']}: {d['profile']} {d['memory_mb']} MiB {d['uuid']}")
    for tool, path in report["tools"].items():
        lines.append(f"  {tool}: {path or 'not found on PATH'}")
    n = report["nccl"]
    state = f"available {n['version']}" if n["available"] else "not available"
    lines.append(f"  NCCL: {state} ({n['reason']})")
    m = report["mps_daemon"]
    lines.append(f"  MPS daemon at {m['pipe_dir']}: "
                 + (f"running (pid {m['pid']})" if m["running"] else "not running"))
    lines.append("  backends:")
    for name, v in report["backends"].items():
        lines.append(f"    {name:6s} {'yes' if v['ok'] else 'no ':3s}  {v['reason']}")
    sims = dict(report["simulators"])
    pick = sims.pop("recommended")
    lines.append("  simulators:")
    for name, v in sims.items():
        lines.append(f"    {name:8s} {'yes' if v['ok'] else 'no ':3s}  {v['reason']}")
    lines.append(f"  recommended simulator: {pick}")
    return "\n".join(lines)
