"""Backend interface (realise a Plan on hardware, set up / tear down around the launch) and the registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gmiexp.config import BackendConfig
from gmiexp.hardware import Hardware
from gmiexp.plan import Plan
from gmiexp.registry import Registry


class Backend(ABC):
    """One way of turning GMIs into processes on a device slice.

    ``realise`` is pure (it only fills the Plan: per-GMI environment, share,
    memory limit, set-up/tear-down commands), so ``mode=plan`` can show
    everything without touching the machine. ``session`` does the side
    effects (start/stop daemons) and must undo them on every exit path.
    """

    name: str = ""

    def __init__(self, cfg: BackendConfig, hardware: Hardware) -> None:
        self.cfg = cfg
        self.hardware = hardware

    @abstractmethod
    def realise(self, plan: Plan, run_dir: Path) -> Plan:
        """Fill backend fields of ``plan`` (and ``plan.backend``); raise ConfigError if impossible."""

    @contextmanager
    def session(self, plan: Plan, run_dir: Path) -> Iterator[None]:
        """Set up before the workers start and always tear down (success, crash, Ctrl-C)."""
        yield


#: Every backend by name, filled by importing :mod:`gmiexp.backends` (each module registers its class).
BACKENDS: Registry[type[Backend]] = Registry("backend", load="gmiexp.backends")
