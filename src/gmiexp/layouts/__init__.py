"""Layout templates (paper section 5.1): each turns the config into the GMIs of a Plan.

``get(name)`` returns the builder; ``configure(plan, cfg)`` then records what the layout's roles
read from the Plan (``plan.channel``, ``plan.async_train``), validates them, and adds the
paper's cost model (Tables 4-5, equations 1-3) to ``plan.notes`` so ``mode=plan`` prints it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from gmiexp.errors import invalid
from gmiexp.layouts.base import LayoutRequest
from gmiexp.plan import Plan

LayoutBuilder = Callable[[LayoutRequest], Plan]

LAYOUTS = ("tcg_ex", "tdg_ex", "decoupled_async", "tcg", "tdg")
#: The built-in role each layout runs when the user left ``role=ppo``.
DEFAULT_ROLES = {"tcg_ex": "ppo", "tdg_ex": "tdg_ex", "decoupled_async": "a3c", "tcg": "serve", "tdg": "tdg"}
#: Layouts whose agents send experience to trainer GMIs over channels.
EXPERIENCE_LAYOUTS = ("tdg_ex", "decoupled_async")


def get(name: str) -> LayoutBuilder:
    """The builder of layout ``name``."""
    if name not in LAYOUTS:
        raise invalid("layout", name, LAYOUTS)
    import importlib

    return importlib.import_module(f"gmiexp.layouts.{name}").build


def choose_role(layout: str, requested: str) -> str:
    """The layout's built-in role when the user asked for the default ``ppo``; else the user's role."""
    return DEFAULT_ROLES.get(layout, requested) if requested == "ppo" else requested


def reduction_for(plan: Plan, requested: str) -> str:
    """``requested``, except for serving-only plans (no trainer GMIs).

    Workers build the reduction collectively over ``plan.trainer_group`` even when it is empty;
    ``allreduce`` then asks torch for a process group of no ranks, which it refuses, while ``mpr``
    builds an empty arena. Nothing is ever reduced in those layouts.
    """
    return "mpr" if not plan.trainer_group else requested


def configure(plan: Plan, cfg: Any) -> Plan:
    """Record and check the channel/async settings, choose the role, add the cost model to the notes (for people)."""
    from gmiexp.layouts.cost import cost_model
    from gmiexp.layouts.experience import check_experience, cost_terms

    plan.role = choose_role(plan.layout, cfg.role)
    if plan.layout in EXPERIENCE_LAYOUTS:
        check_experience(plan, cfg.channel, cfg.async_train)
        plan.channel = copy.deepcopy(cfg.channel)
        plan.async_train = copy.deepcopy(cfg.async_train)
    plan.notes["cost_model"] = cost_model(plan.layout, cost_terms(plan))
    return plan


__all__ = ["DEFAULT_ROLES", "LAYOUTS", "LayoutRequest", "choose_role", "configure", "get", "reduction_for"]
