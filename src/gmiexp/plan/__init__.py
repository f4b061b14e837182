"""The Plan: what a run will start, where (``model``); how a config becomes one (``build``)."""

from gmiexp.plan.model import GMI, Plan

__all__ = ["GMI", "Plan"]
