"""Gradient reduction strategies (paper section 4.1). ``resolve`` picks one for a plan; ``build`` makes it."""

from __future__ import annotations

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.reduction.base import Reduction
from gmiexp.errors import invalid
from gmiexp.plan import Plan

STRATEGIES = ("allreduce", "mpr", "mrr", "har", "auto")
IMPLEMENTED = ("allreduce",)


def resolve(name: str, plan: Plan) -> tuple[str, str]:
    """The concrete strategy for ``plan`` and why (``auto`` runs Algorithm 1)."""
    if name not in STRATEGIES:
        raise invalid("reduction", name, STRATEGIES)
    if name not in IMPLEMENTED:
        raise invalid("reduction", name, IMPLEMENTED, "the paper's strategies land with their own issue")
    return name, f"reduction={name} requested"


def build(name: str, mgr: GMIManager, members: list[int]) -> Reduction:
    """Construct strategy ``name`` (collective across all GMIs)."""
    if name == "allreduce":
        from gmiexp.comm.reduction.allreduce import AllReduce

        return AllReduce(mgr, members)
    raise invalid("reduction", name, IMPLEMENTED)


__all__ = ["IMPLEMENTED", "STRATEGIES", "Reduction", "build", "resolve"]
