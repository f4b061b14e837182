"""rl-games observer: per-step heartbeats, per-epoch progress and history (the launcher logs it to W&B).

The dependency goes one way: the agent (:mod:`gmiexp.rl.rlgames.agent`) hands the observer an
:class:`EpochReport` after each epoch; the observer never reads the agent back. With ``train.info_key`` it also
reads that dotted key of the environment's infos at every step (:class:`gmiexp.rl.infos.InfoMeter`); the agent
averages the epoch's value over the GMIs into the epoch's ``info/<key>``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rl_games.common.algo_observer import AlgoObserver

from gmiexp.rl.infos import InfoMeter
from gmiexp.status import StatusWriter


@dataclass(frozen=True)
class EpochReport:
    """What one GMI's agent tells its observer after an epoch."""

    epoch: int  # rl-games' epoch_num
    frame: int  # rl-games' frame counter (non-zero at the first epoch after resuming a checkpoint)
    curr_frames: int  # frames this GMI stepped in the epoch
    world_size: int  # GMIs stepping the same environments
    timings: dict[str, Any] = field(default_factory=dict)  # the agent's per-epoch times (``*_s``), frames, digest
    reward: float | None = None  # the run-wide mean episode return (None before the first episode ends)
    gmi_reward: float | None = None  # this GMI's own window (``gmi/reward/mean``)
    totals: dict[str, float] = field(default_factory=dict)  # the agent's running time totals (``*_s``)
    learning: dict[str, float] = field(default_factory=dict)  # ``loss/*``, ``train/*``, ``episode/length``
    info: float | None = None  # ``train.info_key``'s epoch value, averaged over the GMIs (None: none seen yet)


class GMIObserver(AlgoObserver):
    """Called by rl-games from its own loop, so a GMI stuck anywhere stops beating."""

    def __init__(self, status: StatusWriter, gmi_id: int, info_key: str = "") -> None:
        super().__init__()
        self.status = status
        self.gmi_id = gmi_id
        self.info = InfoMeter(info_key, gmi_id) if info_key else None  # the agent closes its epochs
        self.t_start = time.perf_counter()
        self.frames = 0
        self.epochs = 0
        self.last_reward: float | None = None
        self.frames0 = 0

    def after_init(self, algo: Any) -> None:
        self.t_start = time.perf_counter()
        self.status.beat(force=True, stage="training")

    def process_infos(self, infos: Any, done_indices: Any) -> None:
        self.status.beat()  # every env step; throttled by the writer
        if self.info is not None:
            self.info.step(infos)

    def after_steps(self) -> None:
        self.status.beat()

    def epoch_done(self, r: EpochReport) -> None:
        """Called by the agent after each epoch on every GMI (rl-games only reports rank 0)."""
        if self.epochs == 0:
            self.frames = self.frames0 = r.frame  # non-zero after resuming from a checkpoint
        self.epochs += 1
        self.frames += r.curr_frames * r.world_size  # global: every GMI steps the same envs
        self.last_reward = r.reward
        ep = r.timings
        # this GMI's file, this GMI's figures: its frames and rate; times are running totals (result.json's)
        row = {
            "iteration": r.epoch,
            "time": time.time(),
            "wall_s": time.perf_counter() - self.t_start,
            "frames": self.frames,
            "frames0": self.frames0,
            "local_frames": int(ep.get("frames", 0)),
            "reward/mean": r.reward,
            "gmi/reward/mean": r.gmi_reward,
            "perf/env_steps_per_s": ep["frames"] / ep["total_s"] if ep.get("total_s") else 0.0,
            **{f"time/{k}": v for k, v in r.totals.items()},
            **r.learning,
            **({"sync/digest": ep["digest"]} if "digest" in ep else {}),
            **({f"info/{self.info.key}": r.info} if self.info is not None else {}),
        }
        self.status.beat(force=True, iteration=row["iteration"], frames=self.frames,
                         steps_per_s=row["perf/env_steps_per_s"] * r.world_size, reward=row["reward/mean"])
        self.status.history(row)
