"""A number the environment reports in its step infos (``train.info_key``), as both trainers' GMIs record it.

Isaac Lab's PBT observer reads its ``objective`` from rl-games' step infos by a dotted key (``infos[a][b]`` for
``a.b``) and keeps the latest value. A GMI reads the key the same way, from rl-games' infos or rsl_rl's extras, but
keeps the mean over the epoch's steps that report it (:class:`InfoMeter`): for a curriculum's level, which changes
only at resets, that is the latest value; for a per-step figure (MuJoCo's ``x_velocity``) it is the epoch's, not
one step's. A member's GMIs average theirs at each epoch (:func:`mean_of_known`) into the history column
``info/<key>``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gmiexp.errors import ConfigError


def _has(node: Any, part: str) -> bool:
    return (isinstance(node, dict) or hasattr(node, "keys")) and part in node.keys()


def _keys(node: Any) -> list[str] | str:
    return sorted(node.keys()) if isinstance(node, dict) or hasattr(node, "keys") else type(node).__name__


def info_value(infos: Any, key: str) -> float | str:
    """The dotted ``key`` of a step's ``infos`` (rl-games' infos, rsl_rl's extras) as a number, or why not.

    A tensor or an array counts as its mean. The infos' own keys are the same at every step: one the key's first
    part is not among is refused (the run's exit 2), naming them, since a misspelt objective would rank nobody.
    Below that a step may lack the rest (mjlab logs an episode's terms only at the steps some environment resets):
    then the text says which level lacks what.
    """
    parts = key.split(".")
    if not _has(infos, parts[0]):
        raise ConfigError(f"invalid train.info_key: {key!r}; the environment's infos have no {parts[0]!r}; valid "
                          f"there: {_keys(infos)}")
    value = infos[parts[0]]
    for i, part in enumerate(parts[1:], 1):
        if not _has(value, part):
            return f"{'.'.join(parts[:i])} had no {part!r} (it had {_keys(value)})"
        value = value[part]
    if isinstance(value, torch.Tensor):
        return float(value.double().mean())
    return float(np.mean(value))


def mean_of_known(value: float | None, all_reduce: Callable[[torch.Tensor], None]) -> float | None:
    """The mean of ``value`` over the GMIs that have one (None where none has): a collective, every GMI calls it."""
    t = torch.tensor([0.0 if value is None else value, float(value is not None)], dtype=torch.float64)
    all_reduce(t)
    return float(t[0] / t[1]) if t[1] else None


class InfoMeter:
    """``train.info_key`` on one GMI: the mean over an epoch's steps that report it.

    After an epoch that reports none the last such epoch's value stands (episode logs come only at the steps some
    environment resets); None until any epoch did. A checkpoint keeps that value in the GMI's record of the run
    (``gmiexp.rl.rlgames.runstate``, ``gmiexp.rl.rslrl.runstate``), so a resumed run says what the unbroken one says.
    """

    def __init__(self, key: str, gmi_id: int) -> None:
        self.key, self.gmi_id = key, gmi_id
        self.total, self.count = 0.0, 0
        self.value: float | None = None
        self.missing = ""  # why a step lacked the key, said at the epoch's end while none was ever seen

    def step(self, infos: Any) -> None:
        value = info_value(infos, self.key)
        if isinstance(value, float):
            self.total += value
            self.count += 1
        else:
            self.missing = value

    def epoch_value(self, epoch: int) -> float | None:
        """Close the epoch: its mean (or the last one's); says on stderr why nothing was reported yet."""
        if self.count:
            self.value = self.total / self.count
        elif self.value is None and self.missing:
            print(f"gmiexp: GMI {self.gmi_id}: train.info_key={self.key} not reported in epoch {epoch}: "
                  f"{self.missing}", file=sys.stderr, flush=True)
        self.total, self.count, self.missing = 0.0, 0, ""
        return self.value
