"""Selection strategies over the ready rows (GEAR 3.3): uniform, prioritized, top-K, FIFO, LIFO.

Uniform and prioritized sample with replacement (as replay buffers do) from a torch Generator, so
a seed gives the same indices; top-K, FIFO and LIFO are deterministic and return distinct rows.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gmiexp.errors import invalid

Selector = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int, torch.Generator | None], torch.Tensor]


class NotEnoughRows(RuntimeError):
    """Fewer ready rows than a deterministic strategy must return distinct rows for."""


def _need(ready: torch.Tensor, k: int) -> None:
    if ready.numel() < k:
        raise NotEnoughRows(f"{k} rows requested, {ready.numel()} ready")


def uniform(
    ready: torch.Tensor, stamp: torch.Tensor, prio: torch.Tensor, k: int, gen: torch.Generator | None
) -> torch.Tensor:
    _need(ready, 1)
    return ready[torch.randint(ready.numel(), (k,), generator=gen)]


def prioritized(
    ready: torch.Tensor, stamp: torch.Tensor, prio: torch.Tensor, k: int, gen: torch.Generator | None
) -> torch.Tensor:
    """Row ``i`` with probability ``prio[i] / sum(prio)``."""
    _need(ready, 1)
    w = prio[ready]
    if not bool((w > 0).any()):
        raise NotEnoughRows("all ready rows have priority 0")
    return ready[torch.multinomial(w, k, replacement=True, generator=gen)]


def topk(
    ready: torch.Tensor, stamp: torch.Tensor, prio: torch.Tensor, k: int, gen: torch.Generator | None
) -> torch.Tensor:
    _need(ready, k)
    return ready[torch.topk(prio[ready], k).indices]


def fifo(
    ready: torch.Tensor, stamp: torch.Tensor, prio: torch.Tensor, k: int, gen: torch.Generator | None
) -> torch.Tensor:
    """The ``k`` oldest committed rows, oldest first."""
    _need(ready, k)
    return ready[torch.argsort(stamp[ready])[:k]]


def lifo(
    ready: torch.Tensor, stamp: torch.Tensor, prio: torch.Tensor, k: int, gen: torch.Generator | None
) -> torch.Tensor:
    """The ``k`` newest committed rows, newest first."""
    _need(ready, k)
    return ready[torch.argsort(stamp[ready], descending=True)[:k]]


SELECTORS: dict[str, Selector] = {
    "uniform": uniform,
    "prioritized": prioritized,
    "topk": topk,
    "fifo": fifo,
    "lifo": lifo,
}


def selector(name: str) -> Selector:
    if name not in SELECTORS:
        raise invalid("selection strategy", name, SELECTORS)
    return SELECTORS[name]
