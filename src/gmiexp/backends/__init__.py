"""GMI backends: direct, mps, mig, auto. ``get`` picks one by name."""

from __future__ import annotations

from gmiexp.backends.base import Backend
from gmiexp.config import BackendConfig
from gmiexp.errors import invalid
from gmiexp.hardware import Hardware

BACKENDS = ("direct", "mps", "mig", "auto")


def get(cfg: BackendConfig, hardware: Hardware) -> Backend:
    """Instantiate the backend named by ``cfg.name``."""
    if cfg.name == "direct":
        from gmiexp.backends.direct import DirectBackend

        return DirectBackend(cfg, hardware)
    if cfg.name == "mps":
        from gmiexp.backends.mps import MPSBackend

        return MPSBackend(cfg, hardware)
    if cfg.name == "mig":
        from gmiexp.backends.mig import MIGBackend

        return MIGBackend(cfg, hardware)
    if cfg.name == "auto":
        from gmiexp.backends.auto import AutoBackend

        return AutoBackend(cfg, hardware)
    raise invalid("backend", cfg.name, BACKENDS)


__all__ = ["BACKENDS", "Backend", "get"]
