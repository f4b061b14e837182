"""Backend auto: the paper's rule (section 3) picks mps, mig or direct and delegates to it.

Training layouts communicate (gradients, experience), which MPS serves
better; serving layouts want MIG's isolation, where the GPUs have it
(compute capability >= 8.0 and MIG enabled). 7.x has MPS only; older GPUs
and CPU-only hosts run direct. The GPU's real MIG mode decides too: on a
MIG-enabled GPU no process can use the whole GPU, so MPS runs *inside* a MIG
instance (backend mig with one MPS daemon per instance). The decision and
its reason go into the plan.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from gmiexp.backends.backend import BACKENDS, Backend
from gmiexp.backends.mps_daemon import CONTROL
from gmiexp.config import BackendConfig
from gmiexp.config.schema import BACKEND_SCHEMAS
from gmiexp.errors import ConfigError
from gmiexp.hardware import Hardware
from gmiexp.plan import Plan


class Choice(NamedTuple):
    """What auto picked: the backend, why, and whether MPS runs inside MIG instances."""

    backend: str
    reason: str
    mps_in_mig: bool = False


def choose(layout: str, hw: Hardware, used: list[int] | None = None,
           which: Callable[[str], str | None] = shutil.which) -> Choice:
    """The backend for ``layout`` on ``hw``; ``used`` = the GPU indices the plan uses.

    Raises ConfigError when the used GPUs mix MIG on and off (no backend serves both).
    """
    if not hw.has_gpu:
        return Choice("direct", f"no GPU on this host ({hw.note or 'CPU only'}): direct")
    gpus = [g for g in hw.gpus if used is None or g.index in used] or hw.gpus
    low = min(gpus, key=lambda g: g.compute_capability)
    cc = ".".join(map(str, low.compute_capability))
    if low.compute_capability < (7, 0):
        return Choice("direct", f"compute capability {cc} < 7.0 ({low.name}) has no MPS limits nor MIG: direct")
    on = [g.index for g in gpus if g.mig_mode]
    off = [g.index for g in gpus if not g.mig_mode]
    if on and off:
        raise ConfigError(f"backend=auto: MIG is enabled on GPU(s) {on} but not on {off}; no backend serves "
                          f"both: use GPUs of one mode (num_gpus), set MIG the same on all (sudo nvidia-smi "
                          f"-i {off[0]} -mig 1, or -i {on[0]} -mig 0), or choose backend=mig|mps|direct by hand")
    mps_here = hw.is_preset or which(CONTROL) is not None
    from gmiexp.layouts import LayoutKind, get  # torch (comm.store): see tests/test_lazy_imports.py ORDER

    serving = get(layout).kind is LayoutKind.SERVING
    if on:
        if serving:
            return Choice("mig", f"serving layout {layout} on compute capability {cc} with MIG enabled: "
                                 "MIG (isolation)")
        if not mps_here:
            return Choice("mig", f"layout {layout} trains, but MIG is enabled on GPU(s) {on} and {CONTROL} is "
                                 "not on PATH: one MIG instance per GMI (no MPS)")
        return Choice("mig", f"layout {layout} trains (GMIs communicate): MPS, per the paper's rule; MIG is "
                             f"enabled on GPU(s) {on}, so MPS runs inside one MIG instance per GPU "
                             "(backend=mig, mps_in_mig)", mps_in_mig=True)
    if not mps_here:
        return Choice("direct", f"{CONTROL} is not on PATH, so MPS cannot start here: direct")
    if not serving:
        return Choice("mps", f"layout {layout} trains (GMIs communicate): MPS, per the paper's rule")
    if low.compute_capability < (8, 0):
        return Choice("mps", f"serving layout {layout}, but compute capability {cc} < 8.0 has no MIG: MPS")
    return Choice("mps", f"serving layout {layout} prefers MIG, but MIG is off on GPU(s) {off} "
                         f"(enable: sudo nvidia-smi -i {off[0]} -mig 1): MPS")


@BACKENDS.register("auto")
class AutoBackend(Backend):
    name = "auto"

    def __init__(self, cfg: BackendConfig, hardware: Hardware) -> None:
        super().__init__(cfg, hardware)
        self.chosen: Backend | None = None

    def _delegate(self, name: str, **changes: object) -> Backend:
        self.chosen = BACKENDS.get(name)(with_name(self.cfg, name, **changes), self.hardware)
        return self.chosen

    def realise(self, plan: Plan, run_dir: Path) -> Plan:
        choice = choose(plan.layout, self.hardware, plan.devices)
        plan.backend_reason = f"auto: {choice.reason}"
        changes = {"mps_in_mig": True} if choice.mps_in_mig else {}
        return self._delegate(choice.backend, **changes).realise(plan, run_dir)

    @contextmanager
    def session(self, plan: Plan, run_dir: Path) -> Iterator[None]:
        """The chosen backend's session (chosen again from ``plan.backend`` if realised elsewhere)."""
        chosen = self.chosen or self._delegate(plan.backend)
        with chosen.session(plan, run_dir):
            yield


def with_name(cfg: BackendConfig, name: str, **changes: object) -> BackendConfig:
    """The config of backend ``name`` (its own schema), from the fields of ``cfg`` that schema has."""
    schema = BACKEND_SCHEMAS[name]
    kept = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(schema) if hasattr(cfg, f.name)}
    return schema(**{**kept, "name": name, **changes})
