"""Whether a re-shape pays: the seconds a faster partition saves over the rest of the run against what moving costs.

``launch.reshape=auto`` measured steps per second only, and on Ant re-shaped five times in the first 75 epochs of
runs too short to win that time back (docs/time-to-reward.md). A re-shape costs

* its own **seconds**: the GMIs end the epoch and checkpoint, the partition is planned, the processes start again
  and the new partition's first (warm-up) epoch runs; measured on this run as the gap between the two partitions'
  epochs beyond one steady epoch (:class:`Ledger` keeps every earlier re-shape's), before the first by
  ``launch.reshape_cost_s``;
* the **learning it throws away**: the episodes in progress it cuts (where the simulator cannot hand its state
  to the new partition: envpool), whose stepped frames lose their return, priced in seconds at the incumbent's
  rate: the episodes and frames the run's earlier re-shapes cut (GMI 0's resume report, ``episodes_cut`` and
  ``frames_cut``), before the first every environment's episode at the finished episodes' mean length (the rows'
  ``episode/length``, at most what an environment stepped in the segment); and a trial's epochs on a partition
  that may be slower.

The gain is the seconds the remaining epochs' frames take less at the faster rate. :func:`weigh` is the rule,
pure (rates, epochs left, costs in; a :class:`Verdict` with its figures out); the explorer asks it before every
trial and every switch (:class:`gmiexp.launch.elastic.Explorer`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

TRIAL, SWITCH = "trial", "switch"


@dataclass(frozen=True)
class Remaining:
    """Where the run stands when a move is weighed."""

    epochs: float  # epochs the run has left (max_iterations less the last one done)
    epoch_frames: float  # frames one epoch steps (every partition steps the same global batch)
    episode_length: float | None = None  # mean length of the episodes finished lately (rows' ``episode/length``)
    steps_per_env: float = math.inf  # steps each environment took in this segment: no episode in progress is older


@dataclass(frozen=True)
class MoveCost:
    """What one re-shape costs this run: its seconds and the frames of the episodes it cuts."""

    seconds: float  # beyond the epoch it trains: stop, checkpoint, re-plan, relaunch, the warm-up epoch's excess
    episodes_cut: float
    episode_frames: float  # frames each cut episode had stepped
    measured: int = 0  # earlier re-shapes of this run whose seconds were measured (0: the prior)

    @property
    def frames_cut(self) -> float:
        return self.episodes_cut * self.episode_frames

    def at(self, rate: float) -> float:
        """Its seconds plus the frames it cuts, re-stepped at ``rate`` env steps/s."""
        return self.seconds + self.frames_cut / rate


@dataclass
class Ledger:
    """The re-shape costs measured on this run, and the prior used before the first."""

    prior_s: float  # launch.reshape_cost_s
    envs: int  # the run's environments: each has an episode in progress that a re-shape may cut
    seconds: list[float] = field(default_factory=list)  # each earlier re-shape's own seconds
    cuts: list[tuple[int, int | None]] = field(default_factory=list)  # each one's episodes and frames cut (its
    #   resume report; frames None where the trainer does not count them)

    def cost(self, at: Remaining) -> MoveCost:
        """One re-shape's cost now: the mean of this run's measured ones, else the prior and today's episodes.

        Episodes cut: as many as the earlier re-shapes cut (0 where the simulator's state was carried over), else
        one per environment. Frames per cut episode: as many as theirs had stepped, where counted; else as long
        as the finished episodes are, at most what an environment stepped in this segment.
        """
        length = at.steps_per_env if at.episode_length is None else min(at.episode_length, at.steps_per_env)
        counted = [(e, f) for e, f in self.cuts if f is not None and e > 0]
        if counted:
            length = sum(f for _, f in counted) / sum(e for e, _ in counted)
        return MoveCost(seconds=fmean(self.seconds) if self.seconds else self.prior_s,
                        episodes_cut=fmean(e for e, _ in self.cuts) if self.cuts else float(self.envs),
                        episode_frames=length if math.isfinite(length) else 0.0, measured=len(self.seconds))


@dataclass(frozen=True)
class Verdict:
    """A move weighed: whether it pays, and the figures that say so."""

    pays: bool
    move: str  # TRIAL or SWITCH
    gain: float  # relative rate gain weighed: measured for a switch; for a trial the gain it hopes to show
    gain_s: float  # seconds the remaining epochs take less at that gain
    cost_s: float  # seconds the move costs: its re-shapes and, for a trial, the epochs it may lose
    payback_epochs: float  # epochs at that gain that win the cost back (inf: no gain)
    epochs_left: float
    need_epochs: float  # the epochs the move needs left to pay: a trial's own epochs plus the payback
    cost: MoveCost

    def why(self) -> str:
        moves = "2 re-shapes (there and back)" if self.move == TRIAL else "1 re-shape"
        c = self.cost
        source = f"mean of {c.measured} measured" if c.measured else "launch.reshape_cost_s"
        need = f"{math.ceil(self.need_epochs)} needed" if math.isfinite(self.need_epochs) else "no gain to win it back"
        return (f"{self.epochs_left:g} epochs left, {need}: +{self.gain:.1%} saves "
                f"{self.gain_s:.1f} s, {moves} cost {self.cost_s:.1f} s ({c.seconds:.1f} s each, {source}, + "
                f"{c.episodes_cut:.0f} episodes x {c.episode_frames:.0f} frames cut)")

    def record(self) -> dict[str, Any]:
        """Its figures for ``reshapes.jsonl``."""
        c = self.cost
        return {"move": self.move, "pays": self.pays, "gain": round(self.gain, 4), "gain_s": round(self.gain_s, 3),
                "cost_s": round(self.cost_s, 3), "payback_epochs": _num(self.payback_epochs),
                "epochs_left": self.epochs_left, "need_epochs": _num(self.need_epochs),
                "reshape_s": round(c.seconds, 3), "reshapes_measured": c.measured,
                "episodes_cut": round(c.episodes_cut, 1), "frames_cut": round(c.frames_cut)}


def _num(x: float) -> float | None:
    return round(x, 1) if math.isfinite(x) else None


def weigh(move: str, rate: float, gain: float, at: Remaining, cost: MoveCost, window: int = 0,
          loss: float = 0.0) -> Verdict:
    """Whether ``move`` pays over the rest of the run.

    ``rate``: the incumbent's env steps/s; ``gain``: the other partition's rate over it, less 1. A **switch**
    costs one re-shape and gains from the next epoch on. A **trial** (A-B-A, :class:`gmiexp.launch.elastic.Explorer`)
    costs two re-shapes, there and back, plus its ``window + 1`` epochs at ``loss`` below the incumbent's rate,
    since it may lose; a win starts paying once both windows of the pair are measured, ``2 (window + 1)`` epochs
    on. It pays when the seconds saved exceed the cost: equivalently, when at least its own epochs plus a payback
    are left.
    """
    epoch_s = at.epoch_frames / rate
    saved = epoch_s * gain / (1 + gain) if gain > 0 else 0.0  # per epoch on the faster partition
    if move == TRIAL:
        slower = min(max(loss, 0.0), 0.99)
        lost = (window + 1) * epoch_s * slower / (1 - slower)
        cost_s, own = 2 * cost.at(rate) + lost, 2.0 * (window + 1)
    else:
        cost_s, own = cost.at(rate), 0.0
    gain_s = saved * max(0.0, at.epochs - own)
    payback = cost_s / saved if saved > 0 else math.inf
    return Verdict(pays=saved > 0 and gain_s > cost_s, move=move, gain=gain, gain_s=gain_s, cost_s=cost_s,
                   payback_epochs=payback, epochs_left=at.epochs, need_epochs=own + payback, cost=cost)
