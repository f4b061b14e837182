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

    def split(self, exp: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Per-field tensors shaped ``(T, N, *shape)``; a ``(N, *shape)`` input is one step."""
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
