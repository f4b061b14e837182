"""What the run executes on: NVML discovery with a clean CPU fallback, and presets for planning.

NVML is reached through ``nvidia-ml-py`` (imported as ``pynvml``). The module
is passed in rather than imported inside the functions, so tests drive the
same code with an NVML stand-in that has the same function names.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from types import ModuleType
from typing import Any

from gmiexp.errors import invalid


@dataclass
class MigDevice:
    """One existing MIG compute instance on a GPU."""

    uuid: str
    gpu_index: int
    index: int  # MIG device index on its GPU (nvmlDeviceGetMigDeviceHandleByIndex)
    profile: str  # e.g. "3g.40gb"
    memory_mb: int
    gi_id: int = -1
    ci_id: int = -1


@dataclass
class GPUInfo:
    index: int
    name: str
    uuid: str = ""
    compute_capability: tuple[int, int] = (0, 0)
    memory_mb: int = 0
    mig_mode: bool | None = None  # None: MIG not supported on this product
    mig_devices: list[MigDevice] = field(default_factory=list)
    # NVML's compute mode: "default" (any processes), "exclusive_process" (one process: MPS's daemon can be it),
    # "prohibited" (none); clusters often set exclusive_process in their job prologue
    compute_mode: str = "default"

    @property
    def cc(self) -> float:
        return self.compute_capability[0] + self.compute_capability[1] / 10


@dataclass
class Hardware:
    """A host: its GPUs (possibly none) and CPU cores."""

    source: str  # "nvml", "cpu" (no driver), or "preset:<name>"
    cpu_count: int
    gpus: list[GPUInfo] = field(default_factory=list)
    driver_version: str = ""
    cuda_version: str = ""
    note: str = ""
    cpu_ids: list[int] = field(default_factory=list)  # usable core ids (affinity); empty = 0..cpu_count-1
    # inter-node bandwidth of one node in Gb/s (Table 2's inter-node term); None = not known (NVML cannot
    # tell; set hardware.network_gbps), the cost model then assumes one and says so
    network_gbps: float | None = None

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def is_preset(self) -> bool:
        return self.source.startswith("preset:")

    def summary(self) -> dict[str, Any]:
        d = asdict(self)
        for g in d["gpus"]:
            g["compute_capability"] = ".".join(map(str, g["compute_capability"]))
        return d

    def describe(self) -> str:
        if not self.gpus:
            return f"CPU only ({self.cpu_count} cores; {self.note or 'no NVIDIA driver'})"
        names = {g.name for g in self.gpus}
        return f"{len(self.gpus)}x {'/'.join(sorted(names))} ({self.source}), {self.cpu_count} cores"


def _gpu(index: int, name: str, cc: tuple[int, int], mem_mb: int, mig: bool | None) -> GPUInfo:
    return GPUInfo(index=index, name=name, uuid=f"GPU-preset-{index:04d}", compute_capability=cc,
                   memory_mb=mem_mb, mig_mode=mig)


# Presets let a user plan a DGX run from a laptop (mode=plan hardware=dgx_a100). They describe stock machines:
# DGX A100/H100/H200 ship with MIG disabled (``mig=False``); ``hardware.mig=true`` plans them with MIG on.
# ``net`` is one node's inter-node bandwidth in Gb/s counted as ONE network port per node: an HDR InfiniBand
# port (200) on the DGX A100, an NDR port (400) on the H100 and H200 hosts. Nodes wired with one port per GPU
# (a DGX has eight compute ports) have that many times more: plan them with hardware.network_gbps=<the sum>.
PRESETS: dict[str, dict[str, Any]] = {
    "dgx_a100": dict(n=8, name="NVIDIA A100-SXM4-40GB", cc=(8, 0), mem=40960, mig=False, cpus=128, net=200.0),
    "h100x8": dict(n=8, name="NVIDIA H100 80GB HBM3", cc=(9, 0), mem=81559, mig=False, cpus=112, net=400.0),
    "h200x1": dict(n=1, name="NVIDIA H200", cc=(9, 0), mem=143771, mig=False, cpus=16, net=400.0),
}
HARDWARE_CHOICES = ("auto", "cpu", *PRESETS)


def preset(name: str) -> Hardware:
    if name == "cpu":
        return cpu_only(note="preset cpu")
    if name not in PRESETS:
        raise invalid("hardware", name, HARDWARE_CHOICES)
    p = PRESETS[name]
    gpus = [_gpu(i, p["name"], p["cc"], p["mem"], p["mig"]) for i in range(p["n"])]
    return Hardware(source=f"preset:{name}", cpu_count=p["cpus"], gpus=gpus,
                    driver_version="preset", cuda_version="preset", network_gbps=p["net"])


def with_mig(hw: Hardware, on: bool) -> Hardware:
    """A preset with MIG mode switched on or off on every MIG-capable GPU (plan both cases).

    A real host's MIG mode is read from NVML and is the GPU's own: overriding it would plan for
    a device that does not exist, so only presets accept it.
    """
    if not hw.is_preset:
        raise invalid("hardware.mig", on, "null on a real host (its GPUs' MIG mode is read through NVML); "
                      f"true/false only with a preset ({', '.join(PRESETS)})")
    for g in hw.gpus:
        if g.mig_mode is not None:
            g.mig_mode = on
    hw.note = f"MIG {'enabled' if on else 'disabled'} (hardware.mig={str(on).lower()})"
    return hw


def cpu_count() -> int:
    """Cores this process may use (respects affinity and container limits)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def cpu_ids() -> list[int]:
    """Ids of the cores this process may use (a run narrowed by ``hardware.cpus`` pins inside them)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return list(range(cpu_count()))


def cpu_only(note: str = "") -> Hardware:
    return Hardware(source="cpu", cpu_count=cpu_count(), note=note, cpu_ids=cpu_ids())


def _text(v: str | bytes) -> str:
    return v.decode() if isinstance(v, bytes) else v


#: NVML's compute modes by value (``NVML_COMPUTEMODE_*``; exclusive_thread is no longer supported by drivers)
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}


def _compute_mode(nvml: ModuleType, handle: Any) -> str:
    try:
        return COMPUTE_MODES.get(int(nvml.nvmlDeviceGetComputeMode(handle)), "default")
    except nvml.NVMLError:  # a driver that cannot tell: as if default (a real exclusive GPU refuses at start)
        return "default"


def _mig_mode(nvml: ModuleType, handle: Any) -> bool | None:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError:
        return None
    return bool(current == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1))


def mig_devices(nvml: ModuleType, handle: Any, gpu_index: int) -> list[MigDevice]:
    """Existing MIG devices of one GPU, through NVML's MIG handle functions."""
    out: list[MigDevice] = []
    count = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
    for i in range(count):
        try:
            mh = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
        except nvml.NVMLError:
            continue
        mem_mb = int(nvml.nvmlDeviceGetMemoryInfo(mh).total // (1024 * 1024))
        name = _text(nvml.nvmlDeviceGetName(mh))
        profile = name.split("MIG ")[-1].strip() if "MIG " in name else name
        gi = ci = -1
        try:
            gi = int(nvml.nvmlDeviceGetGpuInstanceId(mh))
            ci = int(nvml.nvmlDeviceGetComputeInstanceId(mh))
        except (nvml.NVMLError, AttributeError):
            pass
        out.append(MigDevice(uuid=_text(nvml.nvmlDeviceGetUUID(mh)), gpu_index=gpu_index, index=i,
                             profile=profile, memory_mb=mem_mb, gi_id=gi, ci_id=ci))
    return out


def visible(gpus: list[GPUInfo], value: str | None) -> tuple[list[GPUInfo], str]:
    """The GPUs an inherited ``CUDA_VISIBLE_DEVICES`` leaves this process, in its order, and a note on what it cut.

    A scheduler's allocation (Slurm's gres without device cgroups) or a user's choice: NVML lists every GPU of the
    host whatever the variable says, so without this a run would place GMIs on GPUs it was not given. CUDA's rules:
    unset, every GPU; a comma-separated list of indices or UUIDs (``GPU-...``, ``MIG-...``; a prefix is
    enough), read up to the first entry that names no device; empty, none. An index is NVML's (PCI bus order, as
    Slurm numbers GPUs and ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` does); a UUID is exact. A MIG entry keeps its GPU with
    the listed instances only.
    """
    if value is None:
        return gpus, ""
    kept: list[GPUInfo] = []
    migs: dict[int, list[MigDevice]] = {}
    note = ""
    for token in (t.strip() for t in value.split(",")):
        mig = next((d for g in gpus for d in g.mig_devices if token.startswith("MIG-") and
                    (d.uuid if d.uuid.startswith("MIG-") else f"MIG-{d.uuid}").startswith(token)), None)
        gpu = next((g for g in gpus if (token.isdigit() and g.index == int(token)) or (mig and g.index ==
                    mig.gpu_index) or (token.startswith("GPU-") and g.uuid.startswith(token))), None)
        if gpu is None:
            if token or kept:  # an empty value is no GPU, said by the caller
                note = f"CUDA_VISIBLE_DEVICES={value}: {token!r} names no GPU here; CUDA ignores it and what follows"
            break
        if mig is not None:
            migs.setdefault(gpu.index, []).append(mig)
        if gpu not in kept:
            kept.append(gpu)
    kept = [replace(g, mig_devices=migs[g.index]) if g.index in migs else g for g in kept]
    cut = len(gpus) - len(kept)
    said = f"CUDA_VISIBLE_DEVICES={value}: {len(kept)} of the host's {len(gpus)} GPUs" if cut else ""
    return kept, "; ".join(x for x in (said, note) if x)


def discover(nvml: ModuleType | None = None, cuda_visible_devices: str | None = None) -> Hardware:
    """Read the GPUs through NVML; fall back to CPU-only when no driver answers.

    The GPUs are those ``cuda_visible_devices`` leaves (:func:`visible`); None: this process's
    ``CUDA_VISIBLE_DEVICES`` when ``nvml`` is the real library, every GPU when it is a stand-in for another host.
    """
    if cuda_visible_devices is None and nvml is None:
        cuda_visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    if nvml is None:
        try:
            import pynvml as nvml  # nvidia-ml-py
        except ImportError:
            return cpu_only(note="nvidia-ml-py not importable")
    try:
        nvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return cpu_only(note=f"NVML unavailable: {e}")
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        try:
            cv = int(nvml.nvmlSystemGetCudaDriverVersion())
            cuda = f"{cv // 1000}.{(cv % 1000) // 10}"
        except nvml.NVMLError:
            cuda = ""
        gpus, unread = [], []
        for i in range(nvml.nvmlDeviceGetCount()):
            try:  # a GPU this process may not open (a job's device cgroup) or that fell off the bus: left out
                h = nvml.nvmlDeviceGetHandleByIndex(i)
                mig = _mig_mode(nvml, h)
                gpus.append(GPUInfo(
                    index=i,
                    name=_text(nvml.nvmlDeviceGetName(h)),
                    uuid=_text(nvml.nvmlDeviceGetUUID(h)),
                    compute_capability=tuple(nvml.nvmlDeviceGetCudaComputeCapability(h)),
                    memory_mb=int(nvml.nvmlDeviceGetMemoryInfo(h).total // (1024 * 1024)),
                    mig_mode=mig,
                    mig_devices=mig_devices(nvml, h, i) if mig else [],
                    compute_mode=_compute_mode(nvml, h),
                ))
            except nvml.NVMLError as e:
                unread.append(f"GPU {i} left out: NVML cannot read it ({e})")
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutdown failure is harmless
            pass
    if not gpus:
        return cpu_only(note="; ".join(unread) or "NVML found no GPUs")
    gpus, note = visible(gpus, cuda_visible_devices)
    note = "; ".join(x for x in (note, *unread) if x)
    if not gpus:
        return cpu_only(note=note or "CUDA_VISIBLE_DEVICES is empty: no GPU visible")
    return Hardware(source="nvml", cpu_count=cpu_count(), gpus=gpus, driver_version=driver, cuda_version=cuda,
                    cpu_ids=cpu_ids(), note=note)


def resolve(name: str, nvml: ModuleType | None = None) -> Hardware:
    """``auto`` discovers this host; ``cpu`` forces CPU; other names are presets."""
    if name == "auto":
        return discover(nvml)
    return preset(name)
