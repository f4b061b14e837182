"""Layout templates (paper section 5.1): each turns the config into the GMIs of a Plan."""

from __future__ import annotations

from collections.abc import Callable

from gmiexp.errors import invalid
from gmiexp.layouts.base import LayoutRequest
from gmiexp.plan import Plan

LayoutBuilder = Callable[[LayoutRequest], Plan]

LAYOUTS = ("tcg_ex", "tdg_ex", "decoupled_async", "tcg", "tdg")


def get(name: str) -> LayoutBuilder:
    """The builder of layout ``name``."""
    if name == "tcg_ex":
        from gmiexp.layouts.tcg_ex import build

        return build
    if name in LAYOUTS:
        from gmiexp.layouts import pending

        return pending.builder(name)
    raise invalid("layout", name, LAYOUTS)


__all__ = ["LAYOUTS", "LayoutRequest", "get"]
