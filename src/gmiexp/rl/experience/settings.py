"""The train and async settings of a Plan as the config dataclasses (the one place that converts them).

The Plan still carries them as dicts (``plan.train``, ``plan.notes["async"]``); once it holds the
dataclasses themselves these two functions reduce to attribute reads.
"""

from __future__ import annotations

from typing import Any

from gmiexp.config import AsyncConfig, TrainConfig


def train_config(plan: Any) -> TrainConfig:
    """``plan.train`` as a :class:`TrainConfig`."""
    t = plan.train
    return t if isinstance(t, TrainConfig) else TrainConfig(**t)


def async_config(plan: Any) -> AsyncConfig:
    """The async-training settings of an experience layout's Plan as an :class:`AsyncConfig`."""
    a = plan.async_train
    return a if isinstance(a, AsyncConfig) else AsyncConfig(**a)
