"""Layout templates (paper section 5.1): each turns the config into the GMIs of a Plan.

A layout is one module that registers a :class:`~gmiexp.layouts.base.Layout` in :data:`LAYOUTS`
(plus ``conf/layout/<name>.yaml``); importing this package imports the built-in ones. ``get(name)``
returns it; ``configure(plan, cfg)`` then chooses the role, lets the layout check and record what
its roles read from the Plan, and adds the paper's cost model (Tables 4-5) to ``plan.notes`` so
``mode=plan`` prints it.
"""

from __future__ import annotations

from typing import Any

from gmiexp.layouts import decoupled_async, tcg, tcg_ex, tdg, tdg_ex  # noqa: F401 - they register themselves
from gmiexp.layouts.base import LAYOUTS, Layout, LayoutKind, LayoutRequest
from gmiexp.plan import Plan


def get(name: str) -> Layout:
    """Layout ``name`` (ConfigError, exit 2, naming the registered ones otherwise)."""
    return LAYOUTS.get(name)()


def choose_role(layout: str, requested: str) -> str:
    """The layout's default role when the user asked for the default ``ppo``; else the user's role."""
    return get(layout).default_role if requested == "ppo" else requested


def reduction_for(plan: Plan, requested: str) -> str:
    """``requested``, except for serving-only plans (no trainer GMIs).

    Workers build the reduction collectively over ``plan.trainer_group`` even when it is empty;
    ``allreduce`` then asks torch for a process group of no ranks, which it refuses, while ``mpr``
    builds an empty arena. Nothing is ever reduced in those layouts.
    """
    return "mpr" if not plan.trainer_group else requested


def configure(plan: Plan, cfg: Any) -> Plan:
    """Choose the role, let the layout check and record its settings, add the cost model to the notes."""
    from gmiexp.cost.layout import cost_model, terms_for

    layout = get(plan.layout)
    plan.role = choose_role(plan.layout, cfg.role)
    layout.configure(plan, cfg)
    plan.notes["cost_model"] = cost_model(layout.kind, terms_for(plan))
    return plan


__all__ = ["LAYOUTS", "Layout", "LayoutKind", "LayoutRequest", "choose_role", "configure", "get", "reduction_for"]
