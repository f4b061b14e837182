"""Migrator: routes an agent's experience to the least-loaded trainer.

Same device (agent and trainer GMIs on one GPU): *forward*, i.e. flush after a batch whenever
the trainer has drained its rings (it is idle, so latency matters); while it is busy, batches keep
packing into full transfers (Nagle-like), which is what makes small batches cheap.
Different devices: *gather*, i.e. keep filling the chosen route's
Compressors for ``gather_batches`` batches so cross-device transfers are full ``target_bytes``
ones, then pick again. Load is read from the rings' shared counters (slots not yet released by
that trainer), so the choice needs no messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from gmiexp.comm.channels.channelset import ChannelSet
from gmiexp.comm.channels.staging import PinnedStaging
from gmiexp.errors import invalid


@dataclass
class Route:
    """The channels from this agent to one trainer GMI on ``device`` (a GPU index, logical on CPU)."""

    trainer: int
    device: int | str
    channels: ChannelSet


class Migrator:
    """Chooses a route per batch: same-device routes first (forward), else all routes (gather)."""

    def __init__(self, routes: Sequence[Route], device: int | str, gather_batches: int = 4) -> None:
        if not routes:
            raise invalid("trainer count", 0, ">= 1")
        if gather_batches < 1:
            raise invalid("gather_batches", gather_batches, ">= 1")
        self.routes, self.device = list(routes), device
        self.gather_batches = gather_batches
        local = [i for i, r in enumerate(self.routes) if r.device == device]
        self.forward = bool(local)
        self._candidates = local or list(range(len(self.routes)))
        self._current, self._left = -1, 0
        self.sent = [0] * len(self.routes)
        self.staging = PinnedStaging()

    @classmethod
    def single(cls, channels: ChannelSet, device: int | str = "cpu") -> Migrator:
        return cls([Route(0, device, channels)], device)

    def pick(self) -> int:
        """Index of the least-loaded candidate route (ties: fewest batches sent)."""
        return min(self._candidates, key=lambda i: (self.routes[i].channels.load, self.sent[i]))

    def send(self, parts: Mapping[str, torch.Tensor]) -> int:
        if self._left == 0:
            if self._current >= 0:
                self.routes[self._current].channels.flush()
            self._current = self.pick()
            self._left = 1 if self.forward else self.gather_batches
        route = self.routes[self._current]
        route.channels.send(self.staging.to_host(parts))
        self.sent[self._current] += 1
        self._left -= 1
        if self.forward and route.channels.load == 0:
            route.channels.flush()  # trainer idle: deliver now; else keep packing (Nagle-like)
        return self._current

    def flush(self) -> None:
        for r in self.routes:
            r.channels.flush()
        self._left = 0

    def close_writers(self) -> None:
        for r in self.routes:
            r.channels.close_writer()
