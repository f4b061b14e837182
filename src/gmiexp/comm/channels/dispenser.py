"""Dispenser (one per agent): splits an experience batch into its per-field channels.

It validates once per batch (unknown or missing fields, shapes, row counts) so a bad agent fails
at the source with a ConfigError instead of corrupting a trainer's batches, then hands the batch
to the route the Migrator picks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gmiexp.comm.channels.fields import FieldSpec, check_names
from gmiexp.comm.channels.migrator import Migrator
from gmiexp.errors import invalid


class Dispenser:
    """Per-agent front end: ``dispense(exp)`` -> split by field -> Migrator route -> channels."""

    def __init__(self, fields: Sequence[FieldSpec], migrator: Migrator) -> None:
        self.fields = list(fields)
        self.migrator = migrator
        self.batches = 0
        self._spec = [(f.name, f.dtype, torch.Size(f.shape), len(f.shape)) for f in self.fields]

    def split(self, exp: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Per-field tensors shaped ``(T, N, *shape)``; a ``(N, *shape)`` input is one step."""
        out = self._split_fast(exp)
        return out if out is not None else self._split_checked(exp)

    def _split_fast(self, exp: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
        """The common case: exactly the fields, tensors of the right dtype and shape, nothing to convert.

        None on anything else, which ``_split_checked`` then converts or rejects.
        """
        if len(exp) != len(self._spec):
            return None
        out, lead = {}, None
        for name, dtype, shape, nd in self._spec:
            x = exp.get(name)
            if not isinstance(x, torch.Tensor) or x.dtype is not dtype:
                return None
            xs = x.shape
            if len(xs) == nd + 1:
                x = x.unsqueeze(0)
                xs = x.shape
            if len(xs) != nd + 2 or xs[2:] != shape:
                return None
            if lead is None:
                lead = xs[:2]
            elif xs[:2] != lead:
                return None
            out[name] = x
        return out

    def _split_checked(self, exp: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        check_names(exp.keys(), self.fields)
        out, lead = {}, None
        for f in self.fields:
            if f.name not in exp:
                raise invalid("experience batch", sorted(exp), [x.name for x in self.fields], f"missing {f.name!r}")
            x = torch.as_tensor(exp[f.name])
            if x.dtype != f.dtype:
                x = x.to(f.dtype)
            if x.dim() == len(f.shape) + 1:
                x = x.unsqueeze(0)
            if x.dim() != len(f.shape) + 2 or tuple(x.shape[2:]) != f.shape:
                raise invalid(f"shape of field {f.name!r}", tuple(x.shape), f"(T, N, *{f.shape}) or (N, *{f.shape})")
            if lead is not None and x.shape[:2] != lead:
                raise invalid(f"steps x envs of field {f.name!r}", tuple(x.shape[:2]), f"{tuple(lead)} (as the others)")
            lead = x.shape[:2]
            out[f.name] = x  # GPU tensors go through the Migrator's pinned staging
        return out

    def dispense(self, exp: Mapping[str, torch.Tensor]) -> int:
        """Send one experience batch; returns the index of the route (trainer) it went to."""
        parts = self.split(exp)
        self.batches += 1
        return self.migrator.send(parts)

    def close(self) -> None:
        """Flush every route and tell the trainers this agent is done."""
        self.migrator.close_writers()
