"""The run-wide episode window: rl-games' episode meters fed every GMI's finished episodes, in step order.

rl-games reports ``game_rewards.get_mean()``, its :class:`~rl_games.algos_torch.torch_ext.AverageMeter` over
the last ``games_to_track`` episodes of *one* process. With G GMIs on G shares of the environments, one GMI's
last N episodes reach G times further back in time than one process's, so while a policy improves the
figure of a multi-GMI run lagged and read lower. :class:`RunWideMeter` keeps rl-games' meter and its
arithmetic, but at the end of each epoch every GMI replays the episodes that *every* GMI finished, step by
step (at each step GMI 0's, then GMI 1's ...): each GMI holds the meter one process stepping all the
environments would hold, so the best checkpoint, ``score_to_win``, the printed statistics and the reported
``reward/mean`` are the same on every GMI and do not depend on the partition. With one GMI nothing is
gathered and the meter is rl-games' own, update for update (bit-identical to vanilla rl-games).

``local`` keeps this GMI's own window (reported as ``gmi/<id>/reward/mean``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
from rl_games.algos_torch.torch_ext import AverageMeter

from gmiexp.rl.rlgames.checkpoint import EPISODE_METERS

#: One GMI's epoch of episodes: the number finished at each of its meter updates, and their values, on the host.
Episodes = tuple[list[int], torch.Tensor]
#: Exchanges this GMI's epoch of episodes for every GMI's, in GMI order (a collective).
Gather = Callable[[Episodes], list[Episodes]]


def gather_over_group(mine: Episodes) -> list[Episodes]:
    """Every GMI's episodes over the default (gloo) group, in rank order: once per epoch, a few hundred floats."""
    out: list[Episodes | None] = [None] * dist.get_world_size()
    dist.all_gather_object(out, mine)
    return [o for o in out if o is not None]


class RunWideMeter(AverageMeter):
    """rl-games' episode meter over the last ``max_size`` episodes finished anywhere in the run.

    During an epoch :meth:`update` records this GMI's episodes (on its device, no synchronisation per step);
    :meth:`merge` (every GMI, after the epoch) gathers all GMIs' and replays them into the meter. Between an
    update and the merge the run-wide mean is the one of the previous epoch.
    """

    def __init__(self, in_shape: int, max_size: int, gather: Gather | None) -> None:
        super().__init__(in_shape, max_size)
        self.local = AverageMeter(in_shape, max_size)
        self.gather = gather
        self.pending: list[torch.Tensor] = []

    def update(self, values: torch.Tensor) -> None:
        self.local.update(values)
        if self.gather is None:
            super().update(values)
        else:
            self.pending.append(values.detach())

    def merge(self) -> None:
        """Fold every GMI's episodes of this epoch into the run-wide window (collective when gathering)."""
        if self.gather is None:
            return
        sizes = [int(v.shape[0]) for v in self.pending]
        flat = (torch.cat(self.pending) if self.pending else torch.zeros((0,) + tuple(self.mean.shape))).float()
        self.pending = []
        everyone = [(s, f.split(s)) for s, f in self.gather((sizes, flat.cpu()))]
        for step in range(max((len(s) for s, _ in everyone), default=0)):
            done = [parts[step] for s, parts in everyone if step < len(s) and s[step]]
            if done:
                super().update(torch.cat(done).to(self.mean.device))

    def clear(self) -> None:
        super().clear()
        self.local.clear()
        self.pending = []


def run_wide_meters(agent: object, gather: Gather | None) -> None:
    """Replace the agent's three rl-games episode meters by run-wide ones (same size, device and window)."""
    for name in EPISODE_METERS:
        old: AverageMeter = getattr(agent, name)
        meter = RunWideMeter(int(old.mean.shape[0]), int(old.max_size), gather).to(old.mean.device)
        setattr(agent, name, meter)


def merge_meters(agent: object) -> None:
    """After an epoch, on every GMI: the run-wide windows take in every GMI's episodes of the epoch."""
    for name in EPISODE_METERS:
        meter = getattr(agent, name)
        if isinstance(meter, RunWideMeter):
            meter.merge()


def local_mean(meter: AverageMeter) -> float | None:
    """The GMI's own first-column mean (None before its first episode)."""
    own = meter.local if isinstance(meter, RunWideMeter) else meter
    return float(own.get_mean().reshape(-1)[0]) if own.current_size else None
