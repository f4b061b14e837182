"""Layout templates (paper section 5.1): each turns the config into the GMIs of a Plan.

A layout is one module that registers a :class:`~gmiexp.layouts.layout.Layout` in :data:`LAYOUTS`
(plus ``conf/layout/<name>.yaml``); importing this package imports the built-in ones. ``get(name)``
returns it; ``configure(plan, cfg)`` then chooses the role and lets the layout check and record what
its roles read from the Plan; ``paper_families(kind)`` gives the cost model (Tables 4-5) the layouts' rows.
"""

from __future__ import annotations

from typing import Any

from gmiexp.costmodel.templates import PAPER_SERVING_COM_RATIO, PAPER_TRAINING_COM_RATIO, Family
from gmiexp.layouts import decoupled_async, tcg, tcg_ex, tdg, tdg_ex  # noqa: F401 - they register themselves
from gmiexp.layouts.layout import LAYOUTS, Layout, LayoutKind, LayoutRequest
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
    """Choose the role, let the layout check and record its settings."""
    layout = get(plan.layout)
    plan.role = choose_role(plan.layout, cfg.role)
    layout.configure(plan, cfg)
    return plan


def paper_families(kind: LayoutKind) -> list[Family]:
    """The cost-model tables of a layout kind, each fed the registered layouts' own rows.

    Serving (Table 4) for serving layouts, synchronous training (Table 5) for training ones, both for asynchronous.
    """
    serving = Family("serving (Table 4, eq. 2)", "tdg", "tcg", {n: get(n) for n in ("tdg", "tcg")},
                     training=False, com_ratio=PAPER_SERVING_COM_RATIO)
    training = Family("training (Table 5, eq. 3)", "tdg_ex", "tcg_ex", {n: get(n) for n in ("tdg_ex", "tcg_ex")},
                      training=True, com_ratio=PAPER_TRAINING_COM_RATIO)
    return ([serving] if kind in (LayoutKind.SERVING, LayoutKind.ASYNC) else []) + \
        ([training] if kind in (LayoutKind.SYNC, LayoutKind.ASYNC) else [])


__all__ = ["LAYOUTS", "Layout", "LayoutKind", "LayoutRequest", "choose_role", "configure", "get", "paper_families",
           "reduction_for"]
