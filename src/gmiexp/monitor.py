"""Background sampling of GPU utilisation/memory (NVML) and CPU utilisation (psutil).

Metric names are fixed so every run compares in W&B: ``gpu/<i>/util`` (%),
``gpu/<i>/mem_mb``, ``gpu/<i>/mig/<k>/mem_mb`` (per MIG device: NVML reports
no utilisation for MIG) and ``cpu/util`` (%). NVML is passed in like in
:mod:`gmiexp.hardware`, so tests drive it with a stand-in.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

import psutil

from gmiexp.hardware import Hardware

MB = 1024 * 1024


class Monitor:
    """Sample every ``interval_s`` on a daemon thread; ``stop`` returns the mean of each metric."""

    def __init__(self, hardware: Hardware, nvml: ModuleType | None = None, interval_s: float = 1.0) -> None:
        self.hardware = hardware
        self.interval_s = interval_s
        self.nvml = nvml
        self.note = ""
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

    # ---- sampling ------------------------------------------------------
    def sample(self) -> dict[str, float]:
        """One reading of every metric (opens NVML on first use)."""
        self._open_nvml()
        out = self._gpu_metrics() if self._nvml_open else {}
        out["cpu/util"] = float(psutil.cpu_percent(interval=None))
        return out

    def _record(self, values: dict[str, float]) -> None:
        for k, v in values.items():
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
        """Join the thread, take a last sample if none was taken, and return the means."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if not self._counts:
            self._record(self.sample())
        self._close_nvml()
        return {k: self._sums[k] / self._counts[k] for k in sorted(self._sums)}

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
