"""Experience fields: the per-row shape and dtype of each channel, and their validation."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from gmiexp.errors import invalid

#: The paper's experience components (Figure 5a), in channel order.
DEFAULT_FIELDS = ("obs", "actions", "rewards", "values", "dones", "neglogp")


@dataclass(frozen=True)
class FieldSpec:
    """One experience field: per-row ``shape`` (without the step/env dims) and ``dtype``."""

    name: str
    shape: tuple[int, ...] = ()
    dtype: torch.dtype = torch.float32

    row_bytes: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        size = math.prod(self.shape) * torch.empty((), dtype=self.dtype).element_size()
        object.__setattr__(self, "row_bytes", size)  # cached: read on every push


def check_names(names: Iterable[str], fields: Sequence[FieldSpec], what: str = "experience field") -> None:
    """Raise ConfigError naming the first unknown field and the valid ones."""
    valid = [f.name for f in fields]
    for n in names:
        if n not in valid:
            raise invalid(what, n, valid)


def field_specs(
    spec: Mapping[str, tuple[tuple[int, ...], torch.dtype]] | Sequence[FieldSpec],
) -> list[FieldSpec]:
    """Accept FieldSpecs or ``{name: (shape, dtype)}``; reject an empty or duplicated list."""
    out = list(spec) if not isinstance(spec, Mapping) else [FieldSpec(n, tuple(s), d) for n, (s, d) in spec.items()]
    names = [f.name for f in out]
    if not out:
        raise invalid("channel fields", names, "at least one field, e.g. " + ", ".join(DEFAULT_FIELDS))
    if len(set(names)) != len(names):
        raise invalid("channel fields", names, "unique names")
    return out
