"""An NVML stand-in: pynvml's function names and NVMLError classes, recorded values of real GPUs.

``make(gpus)`` returns a module object that ``gmiexp.hardware.discover``,
``gmiexp.launch.monitor.Monitor`` and ``gmiexp.tools.doctor.doctor`` accept in place of
``pynvml``. The error classes are pynvml's own, so ``except nvml.NVMLError``
behaves exactly as with the real library. Values were read on real hosts
(names, memory totals, compute capabilities, MIG UUID style of R470+ drivers).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import types
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pynvml

MiB = 1024 * 1024


@dataclass
class FakeMig:
    profile: str
    uuid: str
    total_mb: int
    used_mb: int = 0
    gi: int = 0
    ci: int = 0
    procs: list[tuple[int, int]] = field(default_factory=list)  # (pid, used bytes) inside this instance


@dataclass
class FakeGPU:
    name: str
    uuid: str
    cc: tuple[int, int]
    total_bytes: int
    used_bytes: int = 512 * MiB
    util: int = 37
    mig: int | None = None  # None: MIG not supported; 0 disabled; 1 enabled
    migs: list[FakeMig] = field(default_factory=list)
    # (pid, used bytes); under MPS NVML lists the MPS server here and the clients in mps_procs
    procs: list[tuple[int, int]] = field(default_factory=list)
    mps_procs: list[tuple[int, int]] = field(default_factory=list)
    proc_util: list[tuple[int, int]] = field(default_factory=list)  # (pid, SM %) samples, oldest first
    compute_mode: int = 0  # pynvml.NVML_COMPUTEMODE_*: 0 default, 2 prohibited, 3 exclusive process
    readable: bool = True  # False: a handle is refused (NO_PERMISSION), as under a job's device cgroup


def a100_40gb(i: int = 0, mig: int | None = 0, migs: list[FakeMig] | None = None) -> FakeGPU:
    return FakeGPU("NVIDIA A100-SXM4-40GB", f"GPU-7a1f3c2e-55d4-4b8e-9a0c-1d2e3f40{i:04d}", (8, 0),
                   42949672960, mig=mig, migs=migs or [])


def h100_80gb(i: int = 0, mig: int | None = 0, migs: list[FakeMig] | None = None) -> FakeGPU:
    return FakeGPU("NVIDIA H100 80GB HBM3", f"GPU-b3c9e7d1-0f2a-4c6b-8e5d-6a7b8c90{i:04d}", (9, 0),
                   85520809984, mig=mig, migs=migs or [])


def h200(i: int = 0, mig: int | None = 0, migs: list[FakeMig] | None = None) -> FakeGPU:
    return FakeGPU("NVIDIA H200", f"GPU-c4d0f8e2-1a3b-4d7c-9f6e-7b8c9da0{i:04d}", (9, 0),
                   150754820096, mig=mig, migs=migs or [])


def v100(i: int = 0) -> FakeGPU:
    return FakeGPU("Tesla V100-SXM2-32GB", f"GPU-d5e1a9f3-2b4c-4e8d-a07f-8c9d0eb1{i:04d}", (7, 0),
                   34359738368)


def p100(i: int = 0) -> FakeGPU:
    return FakeGPU("Tesla P100-PCIE-16GB", f"GPU-e6f2b0a4-3c5d-4f9e-b18a-9d0e1fc2{i:04d}", (6, 0),
                   17071734784)


def a100_migs(profile: str = "3g.20gb", n: int = 2, total_mb: int = 19968, gpu: int = 0) -> list[FakeMig]:
    return [FakeMig(profile, f"MIG-0e1f2a3b-4c5d-5e6f-8a9b-{gpu:04d}{k:08d}", total_mb, 100, gi=k + 1, ci=0)
            for k in range(n)]


@functools.lru_cache(maxsize=64)
def _parse_plan(path: str, mtime_ns: int) -> dict:
    import yaml

    with open(path) as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _load_plan(path: str) -> dict:
    """A run's plan, parsed once per version: NVMLWatch samples every 0.1 s and reads every GMI's plan."""
    return _parse_plan(path, os.stat(path).st_mtime_ns)


def _client_env(pid: str) -> dict[str, str]:
    """The CUDA environment process ``pid`` runs with: a gmiexp GMI's from its plan (the worker applies it after
    start, so /proc shows only what elastic passed), any other process's from /proc.

    A GMI is named by its ``status.json`` (pid), the worker's first write: until then it is no one's client
    (empty), as a real GMI holds no CUDA context before that; a warm GMI's /proc environment is the fork
    server's, whose ``LOCAL_RANK`` would name the wrong GMI.
    """
    env = {k.decode(): v.decode(errors="replace") for k, v in
           (kv.split(b"=", 1) for kv in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if b"=" in kv)}
    # a warm GMI names itself in one string (setproctitle, NUL-padded): split as a shell would
    argv = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").replace("\0", " ").split()
    if "gmiexp.launch.worker" in argv and argv.index("gmiexp.launch.worker") + 1 < len(argv):
        plan_path = argv[argv.index("gmiexp.launch.worker") + 1]
        plan = _load_plan(plan_path)
        by_pid = {}  # a warm GMI's environment is not in /proc (it was set after the fork): its status says who it is
        for status in Path(plan_path).parent.glob("gmis/*/status.json"):
            with contextlib.suppress(OSError, ValueError):
                by_pid[int(json.loads(status.read_text()).get("pid", -1))] = int(status.parent.name)
        node = (plan.get("launch") or {}).get("node_rank") or 0
        local = [g for g in plan["gmis"] if g.get("node", 0) == node]
        if int(pid) not in by_pid:  # not yet a client: a GMI writes its status before it touches the device
            return {}
        env["LOCAL_RANK"] = str(next(i for i, g in enumerate(local) if g["id"] == by_pid[int(pid)]))
        env.update(local[int(env["LOCAL_RANK"])].get("env") or {})
    return env


def mps_clients_from_proc(gpu: FakeGPU, index: int) -> list[tuple[int, int]]:
    """Processes a live fake MPS daemon serves on this GPU, as NVML would list them: their environment names
    the daemon's pipe dir (``CUDA_MPS_PIPE_DIRECTORY``, its pid file alive) and this GPU (UUID or index).

    ``FAKE_NVML_NOT_MPS=1`` leaves out the second GMI of every run (``LOCAL_RANK=1``): a GMI that CUDA ran
    without MPS (no error, no client).
    """
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            env = _client_env(pid)
            pipe = env.get("CUDA_MPS_PIPE_DIRECTORY")
            if pipe is None or env.get("CUDA_VISIBLE_DEVICES") not in (gpu.uuid, str(index)):
                continue
            if os.environ.get("FAKE_NVML_NOT_MPS") == "1" and env.get("LOCAL_RANK") == "1":
                continue
            os.kill(int(open(os.path.join(pipe, "nvidia-cuda-mps-control.pid")).read()), 0)
        except (OSError, ValueError, IndexError, KeyError, TypeError):
            continue
        found.append((int(pid), 1 << 28))
    return sorted(found)


def make(gpus: list[FakeGPU], driver: str = "550.54.15", cuda: int = 12040,
         no_driver: bool = False, mps_from_proc: bool = False) -> types.ModuleType:
    """A module with pynvml's functions over ``gpus``; ``mod.calls`` lists the functions called.

    ``mps_from_proc``: MPS clients are the live processes a fake daemon serves (:func:`mps_clients_from_proc`).
    """
    mod = types.ModuleType("fake_pynvml")
    for name in dir(pynvml):
        if name.startswith(("NVMLError", "NVML_")):
            setattr(mod, name, getattr(pynvml, name))
    mod.calls = []
    state = {"init": 0}

    def api(fn):
        def wrapped(*a, **k):
            mod.calls.append(fn.__name__)
            if fn.__name__ not in ("nvmlInit", "nvmlShutdown") and state["init"] <= 0:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
            return fn(*a, **k)
        wrapped.__name__ = fn.__name__
        setattr(mod, fn.__name__, wrapped)
        return wrapped

    def gpu_of(h) -> FakeGPU:
        if h[0] != "gpu":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpus[h[1]]

    def thing(h):
        return gpus[h[1]] if h[0] == "gpu" else gpus[h[1]].migs[h[2]]

    @api
    def nvmlInit():
        if no_driver:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        state["init"] += 1

    @api
    def nvmlShutdown():
        if state["init"] <= 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        state["init"] -= 1

    @api
    def nvmlSystemGetDriverVersion():
        return driver

    @api
    def nvmlSystemGetCudaDriverVersion():
        return cuda

    @api
    def nvmlDeviceGetCount():
        return len(gpus)

    @api
    def nvmlDeviceGetHandleByIndex(index):
        if not 0 <= index < len(gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if not gpus[index].readable:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)
        return ("gpu", index)

    @api
    def nvmlDeviceGetName(h):
        g = gpus[h[1]]
        return g.name if h[0] == "gpu" else f"{g.name} MIG {g.migs[h[2]].profile}"

    @api
    def nvmlDeviceGetUUID(h):
        return thing(h).uuid

    @api
    def nvmlDeviceGetComputeMode(h):
        return gpu_of(h).compute_mode

    @api
    def nvmlDeviceGetCudaComputeCapability(h):
        return gpus[h[1]].cc

    @api
    def nvmlDeviceGetMemoryInfo(h, version=None):
        t = thing(h)
        if h[0] == "gpu":
            total, used = t.total_bytes, t.used_bytes + sum(m.used_mb * MiB for m in t.migs)
        else:
            total, used = t.total_mb * MiB, t.used_mb * MiB
        return SimpleNamespace(total=total, used=used, free=total - used)

    @api
    def nvmlDeviceGetUtilizationRates(h):
        g = gpu_of(h) if h[0] == "gpu" else None
        if g is None or g.mig == 1:  # NVML reports no utilisation for MIG devices nor MIG-enabled GPUs
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(gpu=g.util, memory=g.util // 2)

    @api
    def nvmlDeviceGetMigMode(h):
        g = gpu_of(h)
        if g.mig is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [g.mig, g.mig]

    @api
    def nvmlDeviceGetMaxMigDeviceCount(h):
        g = gpu_of(h)
        return 0 if g.mig is None else 7

    @api
    def nvmlDeviceGetMigDeviceHandleByIndex(h, index):
        g = gpu_of(h)
        if g.mig != 1 or not 0 <= index < len(g.migs):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return ("mig", h[1], index)

    @api
    def nvmlDeviceIsMigDeviceHandle(h):
        return h[0] == "mig"

    @api
    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h):
        return ("gpu", h[1])

    @api
    def nvmlDeviceGetGpuInstanceId(h):
        if h[0] != "mig":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpus[h[1]].migs[h[2]].gi

    @api
    def nvmlDeviceGetComputeInstanceId(h):
        if h[0] != "mig":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpus[h[1]].migs[h[2]].ci

    def procs(items, gi=0xFFFFFFFF, ci=0xFFFFFFFF):  # NVML_VALUE_NOT_AVAILABLE: not in a MIG instance
        return [SimpleNamespace(pid=p, usedGpuMemory=m, gpuInstanceId=gi, computeInstanceId=ci)
                for p, m in items]

    @api
    def nvmlDeviceGetComputeRunningProcesses(h):
        """On a GPU handle: its processes and those of every MIG instance; on a MIG handle: that instance's."""
        if h[0] == "mig":
            m = gpus[h[1]].migs[h[2]]
            return procs(m.procs, m.gi, m.ci)
        g = gpu_of(h)
        return procs(g.procs) + [p for m in g.migs for p in procs(m.procs, m.gi, m.ci)]

    @api
    def nvmlDeviceGetMPSComputeRunningProcesses(h):
        g = gpu_of(h)
        return procs(g.mps_procs + (mps_clients_from_proc(g, h[1]) if mps_from_proc else []))

    @api
    def nvmlDeviceGetProcessUtilization(h, last_seen_timestamp):
        """Per-process SM samples (pynvml's c_nvmlProcessUtilizationSample_t fields); none on MIG."""
        g = gpu_of(h)
        if g.mig == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not g.proc_util:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)  # no sample since the timestamp
        return [SimpleNamespace(pid=p, timeStamp=1_000_000 + k, smUtil=sm, memUtil=sm // 2, encUtil=0, decUtil=0)
                for k, (p, sm) in enumerate(g.proc_util) if 1_000_000 + k > last_seen_timestamp]

    return mod
