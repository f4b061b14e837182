"""Backend auto: placeholder until its issue lands; refuses clearly instead of running wrongly."""

from __future__ import annotations

from pathlib import Path

from gmiexp.backends.base import Backend
from gmiexp.errors import ConfigError
from gmiexp.plan import Plan


class AutoBackend(Backend):
    name = "auto"

    def realise(self, plan: Plan, run_dir: Path) -> Plan:
        if not self.hardware.has_gpu:
            raise ConfigError(
                "backend=auto needs an NVIDIA GPU, but this host has none (" + self.hardware.describe() + "); "
                "valid here: direct (or plan with hardware=dgx_a100|h100x8|h200x1 mode=plan)"
            )
        raise ConfigError("backend=auto is not implemented yet; valid: direct")
