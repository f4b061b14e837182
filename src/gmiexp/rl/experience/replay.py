"""Off-policy replay on trainer GMIs, backed by the shared-memory :class:`~gmiexp.comm.store.ExperienceStore`.

One store row is one whole rollout (``records x num_envs`` records of every experience field, ``records =
train.horizon_length + 1``, plus how many environments it has), so a replayed rollout still carries its
bootstrap record and its returns and advantages can be recomputed with the current critic; eviction
(FIFO/LIFO) therefore drops whole rollouts too. ``channel.store_capacity`` counts records, as the channels do; the store
holds ``store_capacity // (records x num_envs)`` rollouts.

Each trainer keeps its own store (what it received): a trainer reads only rows it wrote itself, so
no row can be evicted by another process between ``sample`` and ``gather``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from gmiexp.comm.channels import FieldSpec
from gmiexp.comm.store import ExperienceStore
from gmiexp.rl.learner.gae import gae
from gmiexp.rl.rlgames.policy import preproc_obs

#: Selectors that draw with replacement (any count); the others return distinct rollouts.
WITH_REPLACEMENT = ("uniform", "prioritized")
#: Keeps a rollout whose advantages are all 0 selectable by the prioritized strategy.
MIN_PRIORITY = 1e-6

Rollout = tuple[int, int, dict[str, torch.Tensor]]  # (store row, num_envs, fields shaped (horizon * num_envs, ...))


def priority(advantages: torch.Tensor) -> float:
    """Mean |advantage| of a rollout: how much there is still to learn from it."""
    return float(advantages.abs().mean()) + MIN_PRIORITY if advantages.numel() else MIN_PRIORITY


class ReplayStore:
    """Whole rollouts in an :class:`ExperienceStore`; ``add`` after receipt, ``sample`` for replay."""

    def __init__(self, fields: Sequence[FieldSpec], horizon: int, max_envs: int, capacity_rows: int,
                 selection: str, eviction: str, gamma: float, tau: float, seed: int,
                 name: str = "replay", tag: str | None = None) -> None:
        self.horizon, self.max_envs = horizon, max_envs
        self.slot_rows = horizon * max_envs
        self.fields = list(fields)
        specs = [FieldSpec(f.name, (self.slot_rows, *f.shape), f.dtype) for f in self.fields]
        specs.append(FieldSpec("envs", (), torch.int64))
        slots = capacity_rows // self.slot_rows  # >= 1: the planner rejects a rollout larger than the store
        self.store = ExperienceStore.create(specs, slots, eviction, name, tag)
        self.store.unlink()  # private to this trainer: the mappings stay, nothing can leak in /dev/shm
        self.selection = selection
        self.gamma, self.tau = gamma, tau
        self.gen = torch.Generator().manual_seed(seed)
        self.added = 0

    @property
    def capacity(self) -> int:
        """Rollouts the store holds."""
        return self.store.capacity

    @property
    def size(self) -> int:
        return self.store.size

    def _priority(self, n: int, batch: dict[str, torch.Tensor]) -> float:
        if self.selection not in ("prioritized", "topk"):
            return 1.0  # uniform, FIFO and LIFO ignore priorities: skip the advantage pass
        return priority(gae(batch, self.horizon, n, self.gamma, self.tau)["advantages"])

    def add(self, n: int, batch: dict[str, torch.Tensor]) -> int:
        """Copy one received rollout into a free (or evicted) store row in place; returns the row."""
        buf = self.store.allocate(1)
        k = self.horizon * n
        for f in self.fields:
            buf.row(f.name, 0)[:k].copy_(batch[f.name].reshape(k, *f.shape))
        buf.row("envs", 0).fill_(n)
        self.store.commit(buf, self._priority(n, batch))
        self.added += 1
        return int(buf.indices[0])

    def _pick(self, k: int) -> torch.Tensor:
        size = self.size
        if k < 1 or size == 0:
            return torch.zeros(0, dtype=torch.long)
        if self.selection not in WITH_REPLACEMENT:  # distinct rollouts: at most what is stored
            return self.store.sample(min(k, size), self.selection, self.gen)
        parts = []
        while k > 0:  # the store draws at most its capacity at once
            m = min(k, self.capacity)
            parts.append(self.store.sample(m, self.selection, self.gen))
            k -= m
        return torch.cat(parts)

    def sample(self, k: int) -> list[Rollout]:
        """Up to ``k`` rollouts chosen by the configured strategy, copied out of the store."""
        idx = self._pick(k)
        if not idx.numel():
            return []
        rows = self.store.gather(idx)
        out = []
        for j, i in enumerate(idx.tolist()):
            n = int(rows["envs"][j])
            out.append((i, n, {f.name: rows[f.name][j, :self.horizon * n] for f in self.fields}))
        return out

    @torch.no_grad()
    def refresh(self, model: nn.Module, rollout: Rollout, device: torch.device) -> tuple[int, dict[str, torch.Tensor]]:
        """Re-estimate the rollout's values with the current critic and update its priority.

        The stored values came from the behaviour policy's critic, possibly many versions ago;
        advantages and returns recomputed from them would train the critic towards stale targets.
        """
        i, n, batch = rollout
        was_training = model.training
        model.eval()  # eval: no update of the input normaliser, values come out denormalised
        obs = preproc_obs(batch["obs"].to(device))  # uint8 frames are stored as uint8
        res = model({"is_train": False, "prev_actions": None, "obs": obs, "rnn_states": None})
        model.train(was_training)
        batch = dict(batch)
        batch["values"] = res["values"].reshape(-1).float().to(batch["values"].device)
        self.store.update_priorities(torch.tensor([i]), priority(
            gae(batch, self.horizon, n, self.gamma, self.tau)["advantages"]))
        return n, batch

    def stats(self) -> dict[str, Any]:
        return {"replay/stored": self.size, "replay/capacity": self.capacity, "replay/added": self.added}

    def close(self) -> None:
        self.store.close()


__all__ = ["MIN_PRIORITY", "ReplayStore", "priority"]
