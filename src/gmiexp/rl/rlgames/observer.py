"""rl-games observer: per-step heartbeats, per-epoch progress and history (the launcher logs it to W&B).

The dependency goes one way: the agent (:mod:`gmiexp.rl.rlgames.agent`) hands the observer an
:class:`EpochReport` after each epoch; the observer never reads the agent back. With ``train.info_key`` it also
keeps the latest value of that dotted key of the environment's infos (Isaac Lab's PBT observer reads its
``objective`` so), which the agent averages over the GMIs into the epoch's ``info/<key>``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from rl_games.common.algo_observer import AlgoObserver

from gmiexp.errors import ConfigError
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
    info: float | None = None  # ``train.info_key``'s latest value, averaged over the GMIs (None: none seen yet)


def info_value(infos: Any, key: str) -> float | str:
    """The dotted ``key`` of rl-games' step ``infos`` as one number (a tensor's or an array's mean), or why not.

    The infos' own keys are the same at every step: one the key's first part is not among is refused (the run's
    exit 2), naming them, since a misspelt objective would rank nobody. Below that a step may lack the rest (mjlab
    logs an episode's terms only at the steps some environment resets): then the text says which level lacks what.
    """
    parts = key.split(".")
    if not isinstance(infos, dict) or parts[0] not in infos:
        have = sorted(infos) if isinstance(infos, dict) else type(infos).__name__
        raise ConfigError(f"invalid train.info_key: {key!r}; the environment's infos have no {parts[0]!r}; valid "
                          f"there: {have}")
    value = infos[parts[0]]
    for i, part in enumerate(parts[1:], 1):
        if not isinstance(value, dict) or part not in value:
            have = sorted(value) if isinstance(value, dict) else type(value).__name__
            return f"{'.'.join(parts[:i])} had no {part!r} (it had {have})"
        value = value[part]
    if isinstance(value, torch.Tensor):
        return float(value.double().mean())
    return float(np.mean(value))


class GMIObserver(AlgoObserver):
    """Called by rl-games from its own loop, so a GMI stuck anywhere stops beating."""

    def __init__(self, status: StatusWriter, gmi_id: int, info_key: str = "") -> None:
        super().__init__()
        self.status = status
        self.gmi_id = gmi_id
        self.info_key = info_key
        self.info: float | None = None  # the key's latest value on this GMI
        self.info_missing = ""  # why a step lacked the key: said at the epoch's end while none was seen
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
        if self.info_key:
            value = info_value(infos, self.info_key)
            if isinstance(value, float):
                self.info = value  # else the latest value stands, as a curriculum's level does between resets
            else:
                self.info_missing = value

    def after_steps(self) -> None:
        self.status.beat()

    def epoch_done(self, r: EpochReport) -> None:
        """Called by the agent after each epoch on every GMI (rl-games only reports rank 0)."""
        if self.epochs == 0:
            self.frames = self.frames0 = r.frame  # non-zero after resuming from a checkpoint
        self.epochs += 1
        self.frames += r.curr_frames * r.world_size  # global: every GMI steps the same envs
        self.last_reward = r.reward
        if self.info_key and self.info is None and self.info_missing:
            print(f"gmiexp: GMI {self.gmi_id}: train.info_key={self.info_key} not reported in epoch {r.epoch}: "
                  f"{self.info_missing}", file=sys.stderr, flush=True)
            self.info_missing = ""
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
            **({f"info/{self.info_key}": r.info} if self.info_key else {}),
        }
        self.status.beat(force=True, iteration=row["iteration"], frames=self.frames,
                         steps_per_s=row["perf/env_steps_per_s"] * r.world_size, reward=row["reward/mean"])
        self.status.history(row)
