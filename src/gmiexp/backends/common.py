"""Helpers the backends share: CPU core split and thread budget, device lookup, GMIs per device."""

from __future__ import annotations

import re

from gmiexp.errors import ConfigError, invalid, refusal
from gmiexp.hardware import GPUInfo, Hardware
from gmiexp.plan import GMI, Plan

PLANNING_ONLY = "valid here: direct (or plan with hardware=dgx_a100|h100x8|h200x1 mode=plan)"
_MEM = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)B?$", re.IGNORECASE)
_MB = {"": 1 / (1024 * 1024), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def split_cores(n_cores: int, n_gmis: int) -> list[list[int]]:
    """Give each GMI a disjoint, contiguous core set (round-robin when GMIs outnumber cores)."""
    if n_gmis <= n_cores:
        per = n_cores // n_gmis
        return [list(range(i * per, (i + 1) * per)) for i in range(n_gmis)]
    return [[i % n_cores] for i in range(n_gmis)]


def device_cores(plan: Plan, n_cores: int, split: bool) -> list[list[int]]:
    """Per GMI: its device's share of the host cores (``split``: a disjoint part of that share).

    On CPU a logical GPU is then a core set, so GMIs on different devices never compete for a
    core, as GMIs on different GPUs do not compete for SMs.
    """
    devices = sorted({g.device for g in plan.gmis})
    shares = dict(zip(devices, split_cores(n_cores, len(devices)), strict=True))
    out = []
    for g in plan.gmis:
        share = shares[g.device]
        mates = [m.id for m in plan.gmis if m.device == g.device]
        part = split_cores(len(share), len(mates))[mates.index(g.id)] if split else range(len(share))
        out.append([share[i] for i in part])
    return out


def core_ids(hw: Hardware, positions: list[int]) -> list[int]:
    """Core positions (0..cpu_count-1) as the host's core ids (the positions themselves when it has none).

    So a run narrowed by ``hardware.cpus`` (a packed member) pins its GMIs inside its own cores.
    """
    ids = hw.cpu_ids
    return [ids[i % len(ids)] for i in positions] if ids else positions


def thread_budget(n_cores: int, n_gmis_on_host: int) -> int:
    """Torch threads per GMI: its share of the cores, at least 1 (oversubscription stalls libgomp)."""
    return max(1, n_cores // max(1, n_gmis_on_host))


def require_gpu(hw: Hardware, backend: str) -> None:
    if not hw.has_gpu:
        raise ConfigError(f"backend={backend} needs an NVIDIA GPU, but this host has none "
                          f"({hw.describe()}); {PLANNING_ONLY}")


def gpu_of(hw: Hardware, gmi: GMI) -> GPUInfo:
    for g in hw.gpus:
        if g.index == gmi.device:
            return g
    raise invalid(f"device of GMI {gmi.id}", gmi.device, [g.index for g in hw.gpus],
                  f"lower num_gpus to at most {len(hw.gpus)}")


def check_compute_modes(hw: Hardware, processes: dict[int, int], what: str) -> None:
    """Exit 2 when a GPU's compute mode refuses the processes planned on it.

    ``processes``: GPU index -> the CUDA processes that open a context there (an MPS daemon's clients count as
    its one). ``EXCLUSIVE_PROCESS`` (clusters often set it in their job prologue) admits one process a GPU, which
    MPS's daemon can be; ``PROHIBITED`` admits none. Unchecked, the second GMI fails at its first CUDA call ("all
    CUDA-capable devices are busy or unavailable") after the first has started.
    """
    reasons = []
    for g in hw.gpus:
        n, reset = processes.get(g.index, 0), f"nvidia-smi -i {g.index} -c DEFAULT (admin rights)"
        if n and g.compute_mode == "prohibited":
            reasons.append(f"invalid GPU {g.index} for {what}: its compute mode is PROHIBITED, no process may use "
                           f"it; valid: another GPU (hardware.gpus), or {reset}")
        elif n > 1 and g.compute_mode in ("exclusive_process", "exclusive_thread"):
            reasons.append(f"invalid {what} on GPU {g.index}: {n} processes, but its compute mode is "
                           f"{g.compute_mode.upper()}, one process a GPU; valid: backend=mps (its daemon is the "
                           f"one process), one process a GPU, or {reset}")
    if reasons:
        raise refusal(reasons, "GPUs for their compute mode")


def by_device(plan: Plan) -> dict[int, list[GMI]]:
    """GMIs grouped per device, each group in local-index order."""
    out: dict[int, list[GMI]] = {}
    for g in plan.gmis:
        out.setdefault(g.device, []).append(g)
    return {d: sorted(gs, key=lambda g: g.local_index) for d, gs in sorted(out.items())}


def visible_device(hw: Hardware, gpu: GPUInfo) -> str:
    """UUID on a real host (immune to CUDA's device ordering), the index when planning."""
    return gpu.uuid if hw.source == "nvml" and gpu.uuid else str(gpu.index)


def memory_mb(text: str, what: str) -> float:
    """Parse an MPS memory limit such as ``10G`` or ``512MB`` into MiB; ConfigError otherwise."""
    m = _MEM.match(str(text).strip())
    if not m:
        raise invalid(what, text, "a size such as 512M, 10G or 10GB")
    return float(m.group(1)) * _MB[m.group(2).upper()]


def cpu_budget(plan: Plan, hw: Hardware, pin: bool) -> None:
    """Each GMI's torch and simulator threads fit its share of the host's cores (no libgomp stalls)."""
    threads = thread_budget(hw.cpu_count, len(plan.gmis))
    cores = split_cores(hw.cpu_count, len(plan.gmis))
    for g, cs in zip(plan.gmis, cores, strict=True):
        g.torch_threads = g.sim_threads = threads
        g.env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
        if pin:
            g.cpus = core_ids(hw, cs)
