"""Backend mps: an MPS control daemon (private, shared or existing); per-GMI SM share and memory limit.

``realise`` only computes (pipe/log dirs in the run dir, each GMI's CUDA_MPS_*
environment, the start/quit commands), so ``mode=plan`` prints it on any
machine. ``session`` starts the daemon before the workers, checks that it
serves, and quits it exactly once on every exit path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gmiexp.backends import mps_daemon
from gmiexp.backends.backend import BACKENDS, Backend
from gmiexp.backends.common import by_device, check_compute_modes, cpu_budget, gpu_of, memory_mb, visible_device
from gmiexp.backends.mps_clients import check_host, client_env, daemon_commands, mps_session, shares
from gmiexp.config.schema import MpsBackendConfig
from gmiexp.errors import ConfigError, invalid
from gmiexp.hardware import GPUInfo
from gmiexp.plan.model import GMI, MpsState, Plan

MIN_CC = (7, 0)  # Volta MPS: per-client execution resource provisioning and memory limits


def check_cc(gpu: GPUInfo) -> None:
    if gpu.compute_capability < MIN_CC:
        cc = ".".join(map(str, gpu.compute_capability))
        raise ConfigError(f"backend=mps needs compute capability >= 7.0 (Volta) for per-client SM and memory "
                          f"limits; GPU {gpu.index} ({gpu.name}) has {cc}; use backend=direct")


def check_mig_off(gpu: GPUInfo) -> None:
    """MPS over a whole GPU needs MIG off: on a MIG-enabled GPU every process lives inside an instance."""
    if gpu.mig_mode:
        raise ConfigError(f"backend=mps cannot span GPU {gpu.index} ({gpu.name}): MIG is enabled on it, and on "
                          "a MIG-enabled GPU MPS runs inside a MIG instance; valid here: backend=mig "
                          "backend.mps_in_mig=true (MPS inside instances), backend=auto (chooses that for "
                          f"training), backend=mig; or disable MIG (sudo nvidia-smi -i {gpu.index} -mig 0)")


def memory_limits(gmis: list[GMI], default: str | None, gpu: GPUInfo) -> list[str | None]:
    """Pinned device memory per GMI; refuses limits that exceed the GPU's memory."""
    limits = [g.memory_limit or default for g in gmis]
    total = 0.0
    for g, lim in zip(gmis, limits, strict=True):
        if lim is None:
            continue
        mb = memory_mb(lim, f"memory limit of GMI {g.id}")
        total += mb
        if gpu.memory_mb and mb > gpu.memory_mb:
            raise invalid(f"memory limit of GMI {g.id}", lim, f"at most {gpu.memory_mb}M on {gpu.name}")
    if gpu.memory_mb and total > gpu.memory_mb:
        raise ConfigError(f"memory limits on GPU {gpu.index} sum to {total:.0f}M > its {gpu.memory_mb}M; "
                          "lower backend.memory_limit")
    return limits


@BACKENDS.register("mps")
class MPSBackend(Backend):
    name = "mps"
    cfg: MpsBackendConfig

    def realise(self, plan: Plan, run_dir: Path) -> Plan:
        hw = self.hardware
        check_host(hw)
        groups = by_device(plan)
        gpus = [gpu_of(hw, gmis[0]) for gmis in groups.values()]
        for gpu in gpus:
            check_cc(gpu)
            check_mig_off(gpu)
        check_compute_modes(hw, {g.index: 1 for g in gpus}, "backend=mps")  # the daemon: one process a GPU
        mode = self.cfg.daemon
        visible = ",".join(visible_device(hw, g) for g in gpus)  # the daemon serves the plan's GPUs only
        daemon = mps_daemon.for_mode(mode, run_dir, visible, private_visible=visible)
        for gmis in groups.values():
            gpu = gpu_of(hw, gmis[0])
            pcts = shares(gmis, self.cfg.sm_percent, self.cfg.role_sm_percent)
            lims = memory_limits(gmis, self.cfg.memory_limit, gpu)
            for g, p, lim in zip(gmis, pcts, lims, strict=True):
                client_env(g, visible_device(hw, gpu), daemon, p, lim)
        cpu_budget(plan, hw, self.cfg.pin_cores)
        plan.backend = self.name
        plan.backend_reason = plan.backend_reason or "backend=mps (set by hand)"
        plan.mps = MpsState(daemon=mode, daemons=[daemon.to_dict()])
        plan.setup_commands += daemon_commands([daemon])[0]
        plan.teardown_commands += daemon_commands([daemon])[1]
        return plan

    @contextmanager
    def session(self, plan: Plan, run_dir: Path) -> Iterator[None]:
        with mps_session(plan, self.hardware):
            yield
