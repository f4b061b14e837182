"""A recurrent rl-games model's states as the experience channels carry them (rl-games' ``get_default_rnn_state``).

The channels are row-aligned (one row = one environment at one step), so the chunk-start states of an
environment (``size`` floats) are spread over the ``seq_length`` rows of its chunk: row ``j`` of the chunk
carries floats ``j * width .. (j + 1) * width`` (``width = ceil(size / seq_length)``). How the learner cuts
rows into sequences is :mod:`gmiexp.rl.learner.sequences`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from gmiexp.comm.channels import FieldSpec

#: The channel field of the chunk-start states.
FIELD = "rnn_states"


@dataclass(frozen=True)
class StateLayout:
    """A recurrent model's states: ``count`` tensors of ``(layers, envs, units)`` (GRU 1, LSTM 2; twice if separate)."""

    count: int
    layers: int
    units: int
    seq_length: int

    @classmethod
    def of(cls, model: nn.Module, seq_length: int) -> StateLayout | None:
        """The layout of ``model``'s states (rl-games' ``get_default_rnn_state``), None for a feed-forward model."""
        if not model.is_rnn():
            return None
        states = model.get_default_rnn_state()
        layers, _, units = states[0].shape
        return cls(len(states), int(layers), int(units), int(seq_length))

    @property
    def size(self) -> int:
        """Floats of one environment's states."""
        return self.count * self.layers * self.units

    @property
    def width(self) -> int:
        """Floats of the states each row of a chunk carries."""
        return math.ceil(self.size / self.seq_length)

    @property
    def field(self) -> FieldSpec:
        return FieldSpec(FIELD, (self.width,), torch.float32)

    def zeros(self, n: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, ...]:
        return tuple(torch.zeros(self.layers, n, self.units, device=device) for _ in range(self.count))

    def flatten(self, states: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """``(n, seq_length * width)`` host floats per environment (zero padded)."""
        s = torch.stack([t.detach().cpu().float() for t in states])  # (count, layers, n, units)
        n = s.shape[2]
        flat = s.permute(2, 0, 1, 3).reshape(n, self.size)
        return torch.nn.functional.pad(flat, (0, self.seq_length * self.width - self.size))

    def piece(self, flat: torch.Tensor, t: int) -> torch.Tensor:
        """What record ``t`` of a rollout carries: piece ``t % seq_length`` of its chunk's start states."""
        j = t % self.seq_length
        return flat[:, j * self.width:(j + 1) * self.width]

    def chunk_starts(self, field: torch.Tensor, horizon: int, n: int) -> torch.Tensor:
        """The chunk-start states of a rollout's trained records, ``(sequences, count, layers, units)``.

        ``field``: the rollout's ``rnn_states`` rows (step-major, ``horizon * n``); sequences are
        environment-major (environment ``e``, chunk ``c`` is sequence ``e * chunks + c``), as rl-games orders them.
        """
        chunks = (horizon - 1) // self.seq_length
        k = chunks * self.seq_length * n
        f = field[:k].reshape(chunks, self.seq_length, n, self.width).permute(2, 0, 1, 3)
        flat = f.reshape(n * chunks, self.seq_length * self.width)[:, :self.size]
        return flat.reshape(n * chunks, self.count, self.layers, self.units)
