"""Direct backend: plain sharing. CUDA_VISIBLE_DEVICES per GMI on GPUs; thread budget (and pinning) on CPU."""

from __future__ import annotations

from pathlib import Path

from gmiexp.backends.backend import BACKENDS, Backend
from gmiexp.backends.common import (
    by_device,
    check_compute_modes,
    core_ids,
    device_cores,
    gpu_of,
    split_cores,
    thread_budget,
    visible_device,
)
from gmiexp.config.schema import DirectBackendConfig
from gmiexp.errors import ConfigError
from gmiexp.plan import GMI, Plan


@BACKENDS.register("direct")
class DirectBackend(Backend):
    name = "direct"
    cfg: DirectBackendConfig

    def realise(self, plan: Plan, run_dir: Path) -> Plan:
        hw = self.hardware
        n_cores = hw.cpu_count
        cores = split_cores(n_cores, len(plan.gmis))
        threads = thread_budget(n_cores, len(plan.gmis))
        budget = [threads] * len(plan.gmis)
        if self.cfg.pin_devices:  # each device's GMIs share that device's cores (separate "GPUs" on CPU)
            cores = device_cores(plan, n_cores, self.cfg.pin_cores)
            mates = [sum(m.device == g.device for m in plan.gmis) for g in plan.gmis]
            budget = [len(cs) if self.cfg.pin_cores else max(1, len(cs) // k)
                      for cs, k in zip(cores, mates, strict=True)]
        if hw.has_gpu:
            known = [g.index for g in hw.gpus]
            for g in plan.gmis:
                if g.device not in known:
                    raise ConfigError(
                        f"GMI {g.id} wants GPU {g.device} but this host has GPUs {known}; "
                        f"lower num_gpus to at most {len(known)}"
                    )
            check_compute_modes(hw, {d: len(gs) for d, gs in by_device(plan).items()},
                                f"backend=direct with {len(plan.gmis)} GMI(s)")
        pinned = self.cfg.pin_cores or self.cfg.pin_devices
        for g, cs, t in zip(plan.gmis, cores, budget, strict=True):
            # a GPU by its UUID on a real host: an index would be read in CUDA's order, not NVML's
            self._realise_gmi(g, core_ids(hw, cs), t, visible_device(hw, gpu_of(hw, g)) if hw.has_gpu else None,
                              pinned)
        plan.backend = self.name
        plan.backend_reason = plan.backend_reason or "backend=direct (plain time-sharing of each device)"
        return plan

    def _realise_gmi(self, g: GMI, cores: list[int], threads: int, gpu: str | None, pinned: bool) -> None:
        g.torch_threads = threads
        g.sim_threads = threads
        g.env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
        if gpu is not None:
            g.env["CUDA_VISIBLE_DEVICES"] = gpu
            g.share = "shared"
        else:
            g.env["CUDA_VISIBLE_DEVICES"] = ""  # a logical GPU on CPU: never touch a real one
            g.share = f"{threads} of the host's cores"
        if pinned:
            g.cpus = cores
            g.share = f"cpus {cores[0]}-{cores[-1]}" if len(cores) > 1 else f"cpu {cores[0]}"
