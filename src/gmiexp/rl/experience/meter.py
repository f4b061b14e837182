"""Per-iteration history rows and heartbeats of the serving and experience roles."""

from __future__ import annotations

import time
from typing import Any

from gmiexp.role import Role


class Meter:
    """Per-iteration history rows and heartbeats, in the keys the progress bar and summary read."""

    def __init__(self, role: Role) -> None:
        self.role = role
        self.t0 = time.perf_counter()
        self.last = self.t0
        self.frames = 0
        self.predictions = 0

    def row(self, iteration: int, local_frames: int, predictions: int, **extra: Any) -> dict[str, Any]:
        now = time.perf_counter()
        dt = max(now - self.last, 1e-9)
        self.last = now
        self.frames += local_frames
        self.predictions += predictions
        row = {"iteration": iteration, "time": time.time(), "wall_s": now - self.t0, "frames": self.frames,
               "local_frames": local_frames, "perf/env_steps_per_s": local_frames / dt,
               "predictions": predictions, "async/predictions_per_s": predictions / dt, **extra}
        self.role.ctx.status.history(row)
        self.role.heartbeat(force=True, iteration=iteration, frames=self.frames,
                            steps_per_s=row["perf/env_steps_per_s"], reward=extra.get("reward/mean"))
        return row

    @property
    def wall_s(self) -> float:
        return time.perf_counter() - self.t0
