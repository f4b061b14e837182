"""GMI backends: each module registers its class in :data:`BACKENDS` (importing this package imports them).

``get`` instantiates the one a config names.
"""

from __future__ import annotations

from gmiexp.backends import auto, direct, mig, mps  # noqa: F401 - they register themselves (this order is the listed one)
from gmiexp.backends.backend import BACKENDS, Backend
from gmiexp.config import BackendConfig
from gmiexp.hardware import Hardware


def get(cfg: BackendConfig, hardware: Hardware) -> Backend:
    """Instantiate the backend named by ``cfg.name`` (ConfigError, exit 2, naming the registered ones)."""
    return BACKENDS.get(cfg.name)(cfg, hardware)


__all__ = ["BACKENDS", "Backend", "get"]
