"""rl-games observer: per-step heartbeats, per-epoch progress and history (the launcher logs it to W&B)."""

from __future__ import annotations

import time
from typing import Any

from rl_games.common.algo_observer import AlgoObserver

from gmiexp.launch.status import StatusWriter


class GMIObserver(AlgoObserver):
    """Called by rl-games from its own loop, so a GMI stuck anywhere stops beating."""

    def __init__(self, status: StatusWriter, gmi_id: int) -> None:
        super().__init__()
        self.status = status
        self.gmi_id = gmi_id
        self.algo: Any = None
        self.t_start = time.perf_counter()
        self.frames = 0
        self.epochs = 0

    def after_init(self, algo: Any) -> None:
        self.algo = algo
        self.t_start = time.perf_counter()
        self.status.beat(force=True, stage="training")

    def process_infos(self, infos: Any, done_indices: Any) -> None:
        self.status.beat()  # every env step; throttled by the writer

    def after_steps(self) -> None:
        self.status.beat()

    def epoch_done(self) -> None:
        """Called by the PPO role after each epoch on every GMI (rl-games only reports rank 0)."""
        a = self.algo
        if self.epochs == 0:
            self.frames = int(a.frame)  # non-zero after resuming from a checkpoint
        self.epochs += 1
        self.frames += int(a.curr_frames) * a.world_size  # global: every GMI steps the same envs
        ep = a.last_epoch
        row = {
            "iteration": int(a.epoch_num),
            "wall_s": time.perf_counter() - self.t_start,
            "frames": self.frames,
            "local_frames": int(ep.get("frames", 0)),
            "reward/mean": self.reward(),
            "perf/env_steps_per_s": ep["frames"] * a.world_size / ep["total_s"] if ep.get("total_s") else 0.0,
            **{f"time/{k}": v for k, v in ep.items() if k.endswith("_s")},
            **({"sync/digest": ep["digest"]} if "digest" in ep else {}),
        }
        self.status.beat(force=True, iteration=row["iteration"], frames=self.frames,
                         steps_per_s=row["perf/env_steps_per_s"], reward=row["reward/mean"])
        self.status.history(row)

    def reward(self) -> float | None:
        a = self.algo
        if a is None or a.game_rewards.current_size == 0:
            return None
        return float(a.game_rewards.get_mean()[0])
