"""Background sampling of the plan's GPUs (NVML), each GMI's own device use, and CPU utilisation (psutil).

Metric names are fixed so every run compares in W&B: ``gpu/<i>/util`` (%),
``gpu/<i>/mem_mb``, ``gpu/<i>/mig/<k>/mem_mb`` (per MIG device: NVML reports
no utilisation for MIG) and ``cpu/util`` (%), each the mean over the run, for
the plan's GPUs only (other jobs' GPUs say nothing about this run). Per GMI,
from NVML's per-process figures on the GMI's own GPU (compute processes, MPS
clients, processes inside MIG instances): ``gmi/<id>/peak_mem_mb``, the
largest device memory its process held (the peak, not a mean that start-up
dilutes), and ``gmi/<id>/sm_util`` (%) where NVML samples it. NVML is passed
in like in :mod:`gmiexp.hardware`, so tests drive it with a stand-in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import psutil

from gmiexp.hardware import Hardware

MB = 1024 * 1024
PEAK = "/peak_mem_mb"  # metrics kept as the maximum over samples, not the mean


def _used_mb(proc: Any) -> float | None:
    """A process's device memory in MiB; None when NVML cannot tell (no privileges, some MIG setups)."""
    used = getattr(proc, "usedGpuMemory", None)
    if used is None or used >= 0xFFFFFFFFFFFFFFFF - 1:  # NVML_VALUE_NOT_AVAILABLE
        return None
    return used / MB


class Monitor:
    """Sample every ``interval_s`` on a daemon thread; ``stop`` returns the mean of each metric."""

    def __init__(self, hardware: Hardware, nvml: ModuleType | None = None, interval_s: float = 1.0,
                 gmi_devices: dict[int, int] | None = None,
                 pids: Callable[[], dict[int, int]] | None = None) -> None:
        """Sample ``gmi_devices``' GPUs (GMI id -> GPU index; None: every GPU) and the GMIs in ``pids``.

        ``pids`` returns GMI id -> process id of the GMIs started so far; it is read at every sample.
        """
        self.hardware = hardware
        self.interval_s = interval_s
        self.nvml = nvml
        self.gmi_devices = dict(gmi_devices or {})
        self.devices = sorted(set(self.gmi_devices.values())) if gmi_devices is not None else None
        self.pids = pids or dict
        self.note = ""
        self._peaks: dict[str, float] = {}
        self._handles: list[tuple[int, Any, list[tuple[int, Any]]]] = []
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml_open = False

    # ---- NVML ----------------------------------------------------------
    def _open_nvml(self) -> None:
        """Get handles for the host's GPUs; on any failure keep going with CPU metrics only."""
        if self._nvml_open or not self.hardware.has_gpu or self.hardware.is_preset:
            return
        if self.nvml is None:
            try:
                import pynvml

                self.nvml = pynvml
            except ImportError:
                self.note = "nvidia-ml-py not importable: CPU metrics only"
                return
        nv = self.nvml
        try:
            nv.nvmlInit()
        except Exception as e:  # noqa: BLE001 - no driver: CPU metrics only
            self.note = f"NVML unavailable ({e}): CPU metrics only"
            return
        self._nvml_open = True
        for gpu in self.hardware.gpus:
            if self.devices is not None and gpu.index not in self.devices:
                continue
            try:
                h = nv.nvmlDeviceGetHandleByIndex(gpu.index)
                migs = [(d.index, nv.nvmlDeviceGetMigDeviceHandleByIndex(h, d.index))
                        for d in gpu.mig_devices]
            except nv.NVMLError as e:
                self.note += f"GPU {gpu.index} not sampled ({e}); "
                continue
            self._handles.append((gpu.index, h, migs))

    def _close_nvml(self) -> None:
        if self._nvml_open:
            self._nvml_open = False
            self._handles = []
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - shutdown failure is harmless
                pass

    def _gpu_metrics(self) -> dict[str, float]:
        nv = self.nvml
        out: dict[str, float] = {}
        for i, h, migs in self._handles:
            try:
                out[f"gpu/{i}/util"] = float(nv.nvmlDeviceGetUtilizationRates(h).gpu)
            except nv.NVMLError:  # not supported while MIG is on
                pass
            try:
                out[f"gpu/{i}/mem_mb"] = nv.nvmlDeviceGetMemoryInfo(h).used / MB
            except nv.NVMLError:
                pass
            for k, mh in migs:
                try:
                    out[f"gpu/{i}/mig/{k}/mem_mb"] = nv.nvmlDeviceGetMemoryInfo(mh).used / MB
                except nv.NVMLError:
                    pass
        return out

    def _processes(self, h: Any, migs: list[tuple[int, Any]]) -> dict[int, float]:
        """Device MiB per pid of every process NVML sees on one GPU: compute, MPS clients, MIG instances."""
        nv = self.nvml
        out: dict[int, float] = {}
        queries = [(h, "nvmlDeviceGetComputeRunningProcesses"), (h, "nvmlDeviceGetMPSComputeRunningProcesses")]
        queries += [(mh, "nvmlDeviceGetComputeRunningProcesses") for _, mh in migs]
        for handle, fn in queries:
            try:
                procs = getattr(nv, fn)(handle)
            except (nv.NVMLError, AttributeError):  # MPS query before Volta, MIG handles on old drivers
                continue
            for p in procs:
                mb = _used_mb(p)
                if mb is not None:
                    out[int(p.pid)] = max(mb, out.get(int(p.pid), 0.0))
        return out

    def _sm_util(self, h: Any) -> dict[int, float]:
        """SM utilisation (%) per pid, from the latest NVML sample per process (not on MIG: empty)."""
        nv = self.nvml
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(h, 0)
        except (nv.NVMLError, AttributeError):
            return {}
        latest: dict[int, Any] = {}
        for smp in samples:
            if int(smp.pid) not in latest or smp.timeStamp >= latest[int(smp.pid)].timeStamp:
                latest[int(smp.pid)] = smp
        return {pid: float(smp.smUtil) for pid, smp in latest.items()}

    def _gmi_metrics(self) -> dict[str, float]:
        """Each GMI's device memory and SM share, read on its own GPU for its own pid."""
        pids = self.pids()
        if not pids or not self.gmi_devices:
            return {}
        out: dict[str, float] = {}
        for i, h, migs in self._handles:
            mine = {g: pid for g, pid in pids.items() if self.gmi_devices.get(g) == i}
            if not mine:
                continue
            mem = self._processes(h, migs)
            util = self._sm_util(h)
            for g, pid in mine.items():
                if pid in mem:
                    out[f"gmi/{g}{PEAK}"] = mem[pid]
                if pid in util:
                    out[f"gmi/{g}/sm_util"] = util[pid]
        return out

    # ---- sampling ------------------------------------------------------
    def sample(self) -> dict[str, float]:
        """One reading of every metric (opens NVML on first use)."""
        self._open_nvml()
        out = {**self._gpu_metrics(), **self._gmi_metrics()} if self._nvml_open else {}
        out["cpu/util"] = float(psutil.cpu_percent(interval=None))
        return out

    def _record(self, values: dict[str, float]) -> None:
        for k, v in values.items():
            if k.endswith(PEAK):
                self._peaks[k] = max(v, self._peaks.get(k, 0.0))
                continue
            self._sums[k] = self._sums.get(k, 0.0) + v
            self._counts[k] = self._counts.get(k, 0) + 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._record(self.sample())

    def start(self) -> Monitor:
        """Open NVML, prime psutil's CPU counter and start the sampling thread."""
        if self._thread is not None:
            return self
        self._open_nvml()
        psutil.cpu_percent(interval=None)  # the first reading only sets the baseline
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="gmiexp-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        """Join the thread, take a last sample if none was taken; the means, and the per-GMI peaks."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if not self._counts:
            self._record(self.sample())
        self._close_nvml()
        means = {k: self._sums[k] / self._counts[k] for k in self._sums}
        return dict(sorted({**means, **self._peaks}.items()))

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
