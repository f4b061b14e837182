"""Layouts whose issue has not landed yet: they refuse with the ones that work."""

from __future__ import annotations

from collections.abc import Callable

from gmiexp.errors import ConfigError
from gmiexp.layouts.base import LayoutRequest
from gmiexp.plan import Plan


def builder(name: str) -> Callable[[LayoutRequest], Plan]:
    def refuse(req: LayoutRequest) -> Plan:
        raise ConfigError(f"layout={name} is not available yet; valid: tcg_ex")

    return refuse
