"""Backend mig: each GMI on its own MIG instance (``CUDA_VISIBLE_DEVICES=MIG-<uuid>``).

Creating GPU instances needs admin rights and changes the host for everyone,
so gmiexp maps GMIs onto instances that already exist and prints the exact
``nvidia-smi mig`` commands for missing ones; it runs them itself only with
``backend.create_instances=true``. With ``backend.mps_in_mig=true`` several
GMIs share an instance through one MPS daemon per MIG device.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from gmiexp.backends import mig_profiles, mps_daemon
from gmiexp.backends.backend import BACKENDS, Backend
from gmiexp.backends.common import by_device, cpu_budget, gpu_of, require_gpu
from gmiexp.backends.mig_profiles import Profile
from gmiexp.backends.mps_clients import client_env, daemon_commands, mps_session, shares
from gmiexp.config.schema import MigBackendConfig
from gmiexp.errors import ConfigError, LaunchError, invalid
from gmiexp.hardware import GPUInfo, Hardware, MigDevice, discover
from gmiexp.plan.model import GMI, MigState, MpsState, Plan

MIN_CC = (8, 0)  # MIG arrived with Ampere
PENDING = "MIG-<pending:"  # prefix of a placeholder for an instance that setup will create


@dataclass
class Slot:
    """One MIG instance a GMI runs on: existing (uuid known) or to be created by setup."""

    gpu: int
    profile: str
    uuid: str  # "MIG-..." or a PENDING placeholder
    mig_index: int = -1

    @property
    def pending(self) -> bool:
        return self.uuid.startswith(PENDING)


def mig_uuid(dev: MigDevice) -> str:
    """CUDA_VISIBLE_DEVICES spelling of a MIG device (R470+ UUIDs already start with ``MIG-``)."""
    return dev.uuid if dev.uuid.startswith("MIG-") else f"MIG-{dev.uuid}"


def check_gpu(gpu: GPUInfo) -> None:
    """Compute capability >= 8.0, a MIG-capable product, MIG mode on (else say how to enable it)."""
    if gpu.compute_capability < MIN_CC:
        cc = ".".join(map(str, gpu.compute_capability))
        raise ConfigError(f"backend=mig needs compute capability >= 8.0 (Ampere or newer); GPU {gpu.index} "
                          f"({gpu.name}) has {cc}; use backend=mps (cc >= 7.0) or backend=direct")
    if gpu.mig_mode is None:
        raise ConfigError(f"GPU {gpu.index} ({gpu.name}) does not support MIG (products with MIG: "
                          f"{', '.join(mig_profiles.PRODUCTS)}); use backend=mps")
    if not gpu.mig_mode:
        raise ConfigError(f"MIG is disabled on GPU {gpu.index} ({gpu.name}); enable it with "
                          f"`sudo nvidia-smi -i {gpu.index} -mig 1` (no process may be using the GPU; some "
                          "systems need a GPU reset or reboot), or use backend=mps")


def used_slices(gpu: GPUInfo) -> int:
    table = {p.name: p.slices for p in mig_profiles.profiles_of(gpu)}
    return sum(table.get(d.profile, 0) for d in gpu.mig_devices)


def instances_wanted(gpu: GPUInfo, n_gmis: int, cfg: MigBackendConfig) -> tuple[int, Profile | None]:
    """How many instances this GPU needs, and of which profile (None = whatever already exists)."""
    existing = sorted(gpu.mig_devices, key=lambda d: d.index)
    if cfg.profile:
        prof = mig_profiles.find(gpu, cfg.profile)
        count = min(n_gmis, prof.max_count) if cfg.mps_in_mig else n_gmis
        if count > prof.max_count:
            raise ConfigError(f"{count} GMIs on GPU {gpu.index} need {count} instances of {prof.name}, but "
                              f"{gpu.name} holds at most {prof.max_count}; lower gmis_per_gpu, pick a "
                              "smaller backend.profile, or set backend.mps_in_mig=true to share instances")
        return count, prof
    if cfg.mps_in_mig:
        if existing:
            return min(n_gmis, len(existing)), None
        return 1, mig_profiles.largest_fitting(gpu, 1)
    if len(existing) >= n_gmis:
        return n_gmis, None
    return n_gmis, mig_profiles.largest_fitting(gpu, n_gmis)


def create_commands(gpu: GPUInfo, prof: Profile, missing: int) -> list[list[str]]:
    """nvidia-smi argv lists that create ``missing`` instances; ConfigError naming the instances in the way.

    Instances gmiexp did not create belong to someone else: they are never destroyed, only named.
    """
    total = max(p.slices for p in mig_profiles.profiles_of(gpu))
    have = sum(1 for d in gpu.mig_devices if d.profile == prof.name)
    if used_slices(gpu) + missing * prof.slices > total or have + missing > prof.max_count:
        raise in_the_way(gpu, prof, missing)
    return [["nvidia-smi", "mig", "-i", str(gpu.index), "-cgi", ",".join([str(prof.id)] * missing), "-C"]]


def destroy_commands(gpu: int, gi: int, ci: int) -> list[list[str]]:
    """nvidia-smi argv lists that remove one compute instance and its GPU instance, by id (nothing else)."""
    return [["nvidia-smi", "mig", "-i", str(gpu), "-dci", "-gi", str(gi), "-ci", str(ci)],
            ["nvidia-smi", "mig", "-i", str(gpu), "-dgi", "-gi", str(gi)]]


def in_the_way(gpu: GPUInfo, prof: Profile, missing: int) -> ConfigError:
    """Exit 2: existing instances (someone else's) leave no room; name them and what the user may do."""
    devs = sorted(gpu.mig_devices, key=lambda d: d.index)
    named = "; ".join(f"{mig_uuid(d)} ({d.profile}, GPU instance {d.gi_id}, compute instance {d.ci_id})"
                      for d in devs)
    free = " && ".join(show(c) for d in devs for c in destroy_commands(gpu.index, d.gi_id, d.ci_id))
    profiles = sorted({d.profile for d in devs})
    return ConfigError(
        f"GPU {gpu.index} ({gpu.name}) has no room for {missing} more {prof.name} MIG instance(s): these "
        f"instances, which gmiexp did not create, are in the way: {named}. gmiexp leaves them alone; valid: use "
        f"them (backend.profile={'|'.join(profiles)}, backend.mps_in_mig=true to share them, or fewer "
        f"gmis_per_gpu), or remove them yourself once nobody uses them: {free}")


def slots_for(gpu: GPUInfo, count: int, prof: Profile | None) -> tuple[list[Slot], list[list[str]]]:
    """Existing instances first, then placeholders, plus the commands that create the placeholders."""
    existing = sorted(gpu.mig_devices, key=lambda d: d.index)
    if prof is not None:
        existing = [d for d in existing if d.profile == prof.name]
    slots = [Slot(gpu.index, d.profile, mig_uuid(d), d.index) for d in existing[:count]]
    missing = count - len(slots)
    if missing <= 0:
        return slots, []
    assert prof is not None
    cmds = create_commands(gpu, prof, missing)
    slots += [Slot(gpu.index, prof.name, f"{PENDING}gpu{gpu.index}/{prof.name}/{k}>") for k in range(missing)]
    return slots, cmds


def uuid_steps(lines: list[str], pending: list[tuple[Slot, int]]) -> list[str]:
    """``lines`` runnable as printed: each instance placeholder becomes a shell variable.

    The variable is set, once the instances exist, from ``nvidia-smi -L`` (it lists every MIG device's UUID:
    ``MIG <profile> Device <n>: (UUID: MIG-...)``), so every command ``mode=plan`` prints pastes as is.
    """
    steps = []
    for slot, nth in pending:
        if not any(slot.uuid in ln for ln in lines):
            continue
        var = f"MIG_GPU{slot.gpu}_{nth}"
        pattern = rf"s/^ *MIG {re.escape(slot.profile)} .*(UUID: \(MIG-[^)]*\)).*/\1/p"
        steps.append(f"{var}=$(nvidia-smi -L -i {slot.gpu} | sed -n {shlex.quote(pattern)} | sed -n {nth}p)  "
                     f"# once the instances above exist: GPU {slot.gpu}'s {slot.profile} instance no. {nth} "
                     f"(nvidia-smi -L lists their UUIDs)")
        lines = [ln.replace(shlex.quote(slot.uuid), f'"${var}"').replace(slot.uuid, f"${{{var}}}") for ln in lines]
    return steps + lines


def show(cmd: list[str]) -> str:
    return "sudo " + " ".join(shlex.quote(c) for c in cmd)


@BACKENDS.register("mig")
class MIGBackend(Backend):
    cfg: MigBackendConfig
    name = "mig"

    def __init__(self, cfg: MigBackendConfig, hardware: Hardware, nvml: ModuleType | None = None) -> None:
        super().__init__(cfg, hardware)
        self.nvml = nvml  # re-read instances after creating them (None: pynvml)

    def realise(self, plan: Plan, run_dir: Path) -> Plan:
        hw = self.hardware
        require_gpu(hw, self.name)
        creates: list[list[str]] = []
        placed: list[dict[str, Any]] = []
        daemons: list[mps_daemon.Daemon] = []
        pending: list[tuple[Slot, int]] = []  # placeholders, with their place among their profile's instances
        for gmis in by_device(plan).values():
            gpu = gpu_of(hw, gmis[0])
            check_gpu(gpu)
            count, prof = instances_wanted(gpu, len(gmis), self.cfg)
            slots, cmds = slots_for(gpu, count, prof)
            have = sum(1 for d in gpu.mig_devices if prof is not None and d.profile == prof.name)
            pending += [(s, have + k + 1) for k, s in enumerate(x for x in slots if x.pending)]
            creates += cmds
            groups = self._assign(gmis, slots)
            daemons += self._apply(groups, run_dir)
            placed += [{"gmi": g.id, **asdict(s)} for s, gs in groups for g in gs]
        if creates and hw.source == "nvml" and not self.cfg.create_instances:
            raise ConfigError(
                "the plan needs MIG instances that do not exist yet; create them (admin rights) with:\n  "
                + "\n  ".join(show(c) for c in creates)
                + "\nor rerun with backend.create_instances=true to let gmiexp run these commands")
        cpu_budget(plan, hw, self.cfg.pin_cores)
        plan.backend = self.name
        plan.backend_reason = plan.backend_reason or "backend=mig (set by hand)"
        up, down = daemon_commands(daemons)
        plan.setup_commands += [show(c) for c in creates] + uuid_steps(up, pending)
        plan.teardown_commands += down
        plan.mig = MigState(instances=placed, create=creates, create_instances=bool(self.cfg.create_instances))
        if daemons:
            plan.mps = MpsState(daemon=self.cfg.daemon, daemons=[d.to_dict() for d in daemons])
        return plan

    def _assign(self, gmis: list[GMI], slots: list[Slot]) -> list[tuple[Slot, list[GMI]]]:
        """One GMI per instance, or round-robin over instances with MPS inside them."""
        groups: list[list[GMI]] = [[] for _ in slots]
        for k, g in enumerate(gmis):
            groups[k % len(slots)].append(g)
        return [(s, gs) for s, gs in zip(slots, groups, strict=True) if gs]

    def _apply(self, groups: list[tuple[Slot, list[GMI]]], run_dir: Path) -> list[mps_daemon.Daemon]:
        daemons = []
        for slot, gs in groups:
            if self.cfg.mps_in_mig:
                if self.cfg.daemon == "existing":
                    raise invalid("backend.daemon", "existing", "private, shared (with backend.mps_in_mig=true "
                                  "each MIG instance needs its own daemon, which gmiexp starts)")
                tag = f"mps-gpu{slot.gpu}-mig{len(daemons)}"
                d = mps_daemon.for_mode(self.cfg.daemon, run_dir, slot.uuid, name=tag, private_visible=slot.uuid)
                daemons.append(d)
                local = [GMI(id=g.id, device=g.device, roles=g.roles, local_index=i)
                         for i, g in enumerate(gs)]
                pcts = shares(local, None, self.cfg.role_sm_percent)
                for g, p in zip(gs, pcts, strict=True):
                    client_env(g, slot.uuid, d, p, g.memory_limit or self.cfg.memory_limit)
                    g.share = f"{slot.profile} ({p}% via MPS)"
            else:
                g = gs[0]
                g.env.update({"CUDA_VISIBLE_DEVICES": slot.uuid})
                g.share = slot.profile
        return daemons

    @contextmanager
    def session(self, plan: Plan, run_dir: Path) -> Iterator[None]:
        """Create missing instances (only when asked), fill their UUIDs in, then MPS daemons if any."""
        if self.hardware.is_preset:
            raise ConfigError(f"hardware={self.hardware.source.removeprefix('preset:')} is a preset for "
                              "planning only: mode=plan prints this plan; run it on the GPU host")
        creates = plan.mig.create if plan.mig else []
        created: list[MigDevice] = []
        try:
            if creates:
                created = self._create(plan, creates)
                self._fill_pending(plan, created)
            with mps_session(plan, self.hardware):
                yield
        finally:
            remove_created(created)

    def _create(self, plan: Plan, creates: list[list[str]]) -> list[MigDevice]:
        """Run the creation commands; the instances they made (GPU/compute instance ids NVML did not list before)."""
        def ids(hw: Hardware) -> set[tuple[int, int, int]]:
            return {(d.gpu_index, d.gi_id, d.ci_id) for g in hw.gpus for d in g.mig_devices}

        before = ids(discover(self.nvml))
        try:
            for cmd in creates:
                nvidia_smi(cmd)
        finally:  # a command that failed half-way may have made some: they are ours to remove
            created = [d for g in discover(self.nvml).gpus for d in g.mig_devices
                       if (d.gpu_index, d.gi_id, d.ci_id) not in before]
            assert plan.mig is not None
            plan.mig.created = [{"gpu": d.gpu_index, "gi": d.gi_id, "ci": d.ci_id, "uuid": mig_uuid(d),
                                 "profile": d.profile} for d in created]
        return created

    def _fill_pending(self, plan: Plan, created: list[MigDevice]) -> None:
        """Replace placeholders by the UUIDs of the instances just created (read again through NVML)."""
        fresh: dict[int, list[MigDevice]] = {}
        for d in sorted(created, key=lambda d: (d.gpu_index, d.index)):
            fresh.setdefault(d.gpu_index, []).append(d)
        instances = plan.mig.instances if plan.mig else []
        taken = {i["uuid"] for i in instances if not i["uuid"].startswith(PENDING)}
        mapping: dict[str, str] = {}
        for inst in instances:
            old = inst["uuid"]
            if not old.startswith(PENDING) or old in mapping:
                continue
            free = [d for d in fresh.get(inst["gpu"], []) if d.profile == inst["profile"]
                    and mig_uuid(d) not in taken]
            if not free:
                raise LaunchError(f"after creating MIG instances, GPU {inst['gpu']} has no free "
                                  f"{inst['profile']} instance; check `nvidia-smi mig -lgi`")
            mapping[old] = mig_uuid(free[0])
            taken.add(mapping[old])
        _substitute(plan, mapping)


def _substitute(plan: Plan, mapping: dict[str, str]) -> None:
    """Put real UUIDs in place of placeholders; a shared daemon moves to the directory of its real instance."""
    def sub(v: str) -> str:
        for old, new in mapping.items():
            v = v.replace(old, new)
        return v

    for d in plan.mps.daemons if plan.mps else []:
        if d.get("visible"):
            d["visible"] = sub(d["visible"])
            if d.get("mode") == "shared":  # its directory is named by the instance it serves
                real = mps_daemon.shared_daemon(d["visible"])
                mapping = {**mapping, d["pipe_dir"]: real.pipe_dir, d["log_dir"]: real.log_dir}
                d["pipe_dir"], d["log_dir"] = real.pipe_dir, real.log_dir
    for g in plan.gmis:
        g.env = {k: sub(v) for k, v in g.env.items()}
    for inst in plan.mig.instances if plan.mig else []:
        inst["uuid"] = sub(inst["uuid"])


def remove_created(created: list[MigDevice]) -> None:
    """Destroy the instances this run created, by their GPU/compute instance ids; someone else's stay.

    A failure is reported and the others are still tried: this runs while the run ends, whatever happened.
    """
    import sys

    for d in created:
        for cmd in destroy_commands(d.gpu_index, d.gi_id, d.ci_id):
            try:
                nvidia_smi(cmd)
            except (LaunchError, ConfigError) as e:
                print(f"gmiexp: warning: MIG instance {mig_uuid(d)} this run created was not removed: {e}",
                      file=sys.stderr, flush=True)
                break


def nvidia_smi(cmd: list[str]) -> None:
    """Run one ``nvidia-smi mig`` command; LaunchError with its output when it fails."""
    exe = shutil.which(cmd[0])
    if exe is None:
        raise ConfigError(f"{cmd[0]} is not on PATH; backend.create_instances=true needs it")
    res = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, check=False, timeout=120)
    if res.returncode != 0:
        out = (res.stderr or res.stdout).strip()
        raise LaunchError(f"`{show(cmd)}` failed (exit {res.returncode}): {out}")
