"""Slots: where a packed member runs. One slot is one member's slice of one GPU.

A slot's slice is a set of plain gmiexp overrides, so a member is a normal run that can be replayed
by hand from its ``.hydra/overrides.yaml``:

* CPU host (logical GPUs): each logical GPU is a share of the launcher's cores, split among its
  slots (``hardware.cpus``), as MPS splits a GPU's SMs; slots outnumbering cores share them.
* GPU with MIG on: slot k of a GPU runs on the GPU's k-th existing MIG instance
  (``backend=mig hardware.mig_instances=[uuid]``).
* GPU: an MPS share of 100/jobs_per_gpu % of the SMs through the GPU's one shared daemon
  (``backend=mps backend.sm_percent=... backend.daemon=shared``), on that GPU (``hardware.gpus``).

Recycling (:mod:`gmiexp.pack.recycle`) counts a slot as its :attr:`Slot.units`: its cores on a CPU host, its
share of the GPU on an MPS GPU. A MIG instance is not handed over.

A member that chose its backend by hand (``backend=...`` in its overrides) keeps it: only its GPU
(and, for mps, its SM share) is set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gmiexp.backends.common import check_compute_modes, split_cores
from gmiexp.errors import ConfigError, invalid
from gmiexp.hardware import GPUInfo, Hardware

AUTO = "auto"


@dataclass(frozen=True)
class Slot:
    """One place a member can run: GPU ``gpu`` (logical on CPU), position ``index`` among its slots."""

    gpu: int
    index: int
    cpus: tuple[int, ...] = ()  # CPU host: the slot's cores
    mig_uuid: str = ""  # MIG host: the slot's instance

    @property
    def name(self) -> str:
        return f"gpu{self.gpu}/{self.index}"

    @property
    def units(self) -> tuple[Unit, ...]:
        """What recycling hands over when the slot frees: its cores on a CPU host, else its share of its GPU."""
        return self.cpus if self.cpus else ((self.gpu, self.index),)


#: a piece of a slot recycling counts: a core (CPU host), or one slot's share of a GPU's SMs, ``(gpu, index)``
Unit = int | tuple[int, int]


@dataclass
class Member:
    """What a slot needs to know about the member it runs: its backend choice and GMIs per GPU."""

    backend: str | None  # backend=... given in the member's overrides, None = the launcher's choice
    gmis_per_gpu: int = 1


def jobs_per_gpu(value: object) -> int | str:
    """``hydra.launcher.jobs_per_gpu``: an integer >= 1 or ``auto``; ConfigError otherwise."""
    if value == AUTO:
        return AUTO
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise invalid("hydra.launcher.jobs_per_gpu", value, "an integer >= 1, or auto")


def choose_gpus(hw: Hardware, wanted: list[int] | None, key: str = "hydra.launcher.gpus") -> list[int]:
    """The GPUs to pack onto: the listed ones (checked against the host), else all (one logical GPU on CPU).

    ``key``: the setting ``wanted`` came from, which an error names.
    """
    valid = [g.index for g in hw.gpus]
    if wanted is None:
        return valid or [0]
    gpus = list(wanted)
    if not gpus or len(set(gpus)) != len(gpus):
        raise invalid(key, gpus, f"distinct GPU indices from {valid or 'logical GPUs 0, 1, ...'}")
    for g in gpus:
        if (hw.has_gpu and g not in valid) or g < 0:
            raise invalid(f"{key} entry", g, valid or "logical GPU indices >= 0")
    if not hw.has_gpu and len(gpus) > len(os.sched_getaffinity(0)):
        raise invalid(key, gpus, f"at most {len(os.sched_getaffinity(0))} logical GPUs "
                      "(one core each at least) on this CPU host")
    return gpus


def make_slots(hw: Hardware, gpus: list[int], per_gpu: int, cores: list[int] | None = None) -> list[Slot]:
    """``per_gpu`` slots on each GPU, ordered so that consecutive members go to different GPUs.

    ``cores``: a CPU host's cores to split (None: every core this process may run on).
    """
    if hw.has_gpu:
        by_index = {g.index: g for g in hw.gpus}
        out = []
        for k in range(per_gpu):
            for d in gpus:
                migs = sorted(by_index[d].mig_devices, key=lambda m: m.index) if by_index[d].mig_mode else []
                if by_index[d].mig_mode and len(migs) < per_gpu:
                    raise ConfigError(f"GPU {d} has MIG on and {len(migs)} MIG instance(s); jobs_per_gpu={per_gpu} "
                                      f"needs one each: lower hydra.launcher.jobs_per_gpu to at most {len(migs)} "
                                      "or create instances (nvidia-smi mig -cgi ... -C, admin rights)")
                out.append(Slot(d, k, mig_uuid=migs[k].uuid if migs else ""))
        return out
    cores = sorted(cores or os.sched_getaffinity(0))
    shares = split_cores(len(cores), len(gpus))  # each logical GPU: its positions in ``cores``
    out = []
    for k in range(per_gpu):
        for d, share in zip(gpus, shares, strict=True):
            part = split_cores(len(share), per_gpu)[k]
            out.append(Slot(d, k, cpus=tuple(cores[share[i]] for i in part)))
    return out


def tightest(hw: Hardware, pool: list[Slot]) -> Slot:
    """The slot of least device memory: a MIG instance's, else its GPU's; the first of equals.

    A member planned there fits every slot of the pool, so a check before any start plans it on that one only.
    """
    by_index = {g.index: g for g in hw.gpus}
    migs = {d.uuid: d.memory_mb for g in hw.gpus for d in g.mig_devices}

    def memory(slot: Slot) -> int:
        if slot.mig_uuid:
            return migs.get(slot.mig_uuid, 0)
        gpu = by_index.get(slot.gpu)
        return gpu.memory_mb if gpu is not None and hw.has_gpu else 0

    return min(pool, key=memory)


def slot_overrides(slot: Slot, member: Member, per_gpu: int) -> list[str]:
    """The overrides that put ``member`` on ``slot`` (appended last, so they win over the member's own)."""
    if slot.cpus:
        return [f"hardware.cpus=[{','.join(map(str, slot.cpus))}]"]
    out = [f"hardware.gpus=[{slot.gpu}]"]
    if slot.mig_uuid and member.backend in (None, "mig"):
        out += ["backend=mig", f"hardware.mig_instances=['{slot.mig_uuid}']"]  # quoted: a UUID is no number
        if member.gmis_per_gpu > 1:
            out.append("backend.mps_in_mig=true")
        return out
    if on_mps(slot, member):
        pct = sm_percent(1, per_gpu, member.gmis_per_gpu)
        out += ["backend=mps", f"backend.sm_percent=[{','.join([str(pct)] * member.gmis_per_gpu)}]",
                "backend.daemon=shared"]  # one daemon (one MPS server) per GPU for every member on it
    return out


def check_sharing(hw: Hardware, gpus: list[int], per_gpu: int, members: list[Member]) -> None:
    """Exit 2 when ``per_gpu`` members a GPU would put several processes on one that admits one process.

    A member on the GPU's one shared MPS daemon is one process with the others there; one with backend=direct is
    its GMIs. MIG instances are apart.
    """
    direct = [m for m in members if m.backend not in (None, "mps", "auto", "mig")]
    if per_gpu < 2 or not direct:
        return
    worst = per_gpu * max(m.gmis_per_gpu for m in direct)
    check_compute_modes(hw, {g.index: worst for g in hw.gpus if g.index in gpus and not g.mig_mode},
                        f"{per_gpu} members a GPU with backend={direct[0].backend}")


def on_mps(slot: Slot, member: Member) -> bool:
    """Whether the member runs on an MPS share of the slot's GPU (the launcher's choice, or its own mps/auto)."""
    return not slot.cpus and not slot.mig_uuid and member.backend in (None, "mps", "auto")


def sm_percent(slots_held: int, per_gpu: int, gmis: int) -> int:
    """Each GMI's SM share when a member holds ``slots_held`` of its GPU's ``per_gpu`` slots with ``gmis`` GMIs."""
    return max(1, 100 * slots_held // (per_gpu * gmis))


def mps_gpus(hw: Hardware, gpus: list[int], members: list[Member]) -> list[GPUInfo]:
    """The GPUs whose members share an MPS daemon (MIG off, and a member that takes the launcher's mps)."""
    if not any(m.backend in (None, "mps", "auto") for m in members):
        return []
    return [g for g in hw.gpus if g.index in gpus and not g.mig_mode]
