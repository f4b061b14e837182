"""Closed sets of choices, one home each. String-valued, so YAML, the CLI and plan.yaml keep plain strings.

Open sets (layout, backend, reduction and simulator names) come from their registries instead, so a variant
can be added without editing an enum.
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """What ``python -m gmiexp`` does with the composed config."""

    train = "train"
    plan = "plan"
    search = "search"
    doctor = "doctor"
    eval = "eval"


class ChannelMode(StrEnum):
    """Experience channels (paper section 4.2): one ring per field (multi) or one packed ring (uni)."""

    multi = "multi"
    uni = "uni"


class OnFull(StrEnum):
    """What a channel's producer does when the ring is full: wait for a slot, or drop the piece."""

    block = "block"
    drop = "drop"
