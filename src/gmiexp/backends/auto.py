"""Backend auto: the paper's rule (section 3) picks mps, mig or direct and delegates to it.

Training layouts communicate (gradients, experience), which MPS serves
better; serving layouts want MIG's isolation, where the GPUs have it
(compute capability >= 8.0 and MIG enabled). 7.x has MPS only; older GPUs
and CPU-only hosts run direct. The decision and its reason go into the plan.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gmiexp.backends.base import Backend
from gmiexp.backends.mps_daemon import CONTROL
from gmiexp.config import BackendConfig
from gmiexp.hardware import Hardware
from gmiexp.plan import Plan

SERVING_LAYOUTS = ("tcg", "tdg")


def choose(layout: str, hw: Hardware, used: list[int] | None = None,
           which: Callable[[str], str | None] = shutil.which) -> tuple[str, str]:
    """(backend name, reason) for ``layout`` on ``hw``; ``used`` = the GPU indices the plan uses."""
    if not hw.has_gpu:
        return "direct", f"no GPU on this host ({hw.note or 'CPU only'}): direct"
    gpus = [g for g in hw.gpus if used is None or g.index in used] or hw.gpus
    low = min(gpus, key=lambda g: g.compute_capability)
    cc = ".".join(map(str, low.compute_capability))
    if low.compute_capability < (7, 0):
        return "direct", f"compute capability {cc} < 7.0 ({low.name}) has no MPS limits nor MIG: direct"
    if not hw.is_preset and which(CONTROL) is None:
        return "direct", f"{CONTROL} is not on PATH, so MPS cannot start here: direct"
    serving = layout in SERVING_LAYOUTS
    if not serving:
        return "mps", f"layout {layout} trains (GMIs communicate): MPS, per the paper's rule"
    if low.compute_capability < (8, 0):
        return "mps", f"serving layout {layout}, but compute capability {cc} < 8.0 has no MIG: MPS"
    off = [g.index for g in gpus if not g.mig_mode]
    if off:
        return "mps", (f"serving layout {layout} prefers MIG, but MIG is off on GPU(s) {off} "
                       f"(enable: sudo nvidia-smi -i {off[0]} -mig 1): MPS")
    return "mig", f"serving layout {layout} on compute capability {cc} with MIG enabled: MIG (isolation)"


class AutoBackend(Backend):
    name = "auto"

    def __init__(self, cfg: BackendConfig, hardware: Hardware) -> None:
        super().__init__(cfg, hardware)
        self.chosen: Backend | None = None

    def _delegate(self, name: str) -> Backend:
        from gmiexp.backends import get

        self.chosen = get(with_name(self.cfg, name), self.hardware)
        return self.chosen

    def realise(self, plan: Plan, run_dir: Path) -> Plan:
        name, reason = choose(plan.layout, self.hardware, plan.devices)
        plan.backend_reason = f"auto: {reason}"
        return self._delegate(name).realise(plan, run_dir)

    @contextmanager
    def session(self, plan: Plan, run_dir: Path) -> Iterator[None]:
        """The chosen backend's session (chosen again from ``plan.backend`` if realised elsewhere)."""
        chosen = self.chosen or self._delegate(plan.backend)
        with chosen.session(plan, run_dir):
            yield


def with_name(cfg: BackendConfig, name: str) -> BackendConfig:
    """A copy of the backend config (dataclass or Hydra node) naming another backend."""
    if not dataclasses.is_dataclass(cfg):
        from omegaconf import OmegaConf

        obj = OmegaConf.to_object(cfg)  # type: ignore[arg-type]
        cfg = obj if dataclasses.is_dataclass(obj) else BackendConfig(**obj)  # type: ignore[arg-type]
    return dataclasses.replace(cfg, name=name)
