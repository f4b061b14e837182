"""Launcher-side thread: reads GMI status files, shows progress (gmiexp.launch.progress), kills hung GMIs."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

from gmiexp.config import LaunchConfig
from gmiexp.launch.progress import Progress, make_progress
from gmiexp.launch.status import read_status


@dataclass
class Hang:
    gmi: int
    silent_s: float
    stage: str


@dataclass
class Watchdog:
    """Heartbeat monitor (Sample Factory style) and progress aggregation for one launch."""

    run_dir: str
    gmis: list[int]  # this node's GMI ids (global ids: node 1's start after node 0's)
    total_frames: int
    heartbeat_timeout_s: float
    interval_s: float = LaunchConfig.monitor_interval_s  # defaults: the schema's (launch.*)
    progress: bool = LaunchConfig.progress
    progress_interval_s: float = LaunchConfig.progress_interval_s  # plain progress lines when stderr is no terminal
    hang: Hang | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Watchdog:
        self._thread = threading.Thread(target=self._loop, name="gmiexp-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        display = make_progress(self.total_frames, self.progress, self.progress_interval_s, sys.stderr)
        t_start = time.time()
        try:
            while not self._stop.wait(self.interval_s):
                statuses = [read_status(self.run_dir, i) for i in self.gmis]
                if self.hang is None:
                    self._check_heartbeats(statuses, t_start)
                self._show(display, statuses)
            self._show(display, [read_status(self.run_dir, self.gmis[0])])  # the final state, for the last line
        finally:
            display.close()

    def _show(self, display: Progress, statuses: list[dict | None]) -> None:
        s0 = statuses[0] if statuses else None
        if not s0:
            return
        try:
            reward = s0.get("reward")
            # the node's first GMI (GMI 0 on node 0) carries the run's global frames and rate
            frames, rate = int(s0.get("frames", 0)), float(s0.get("steps_per_s", 0.0))
            iteration = int(s0.get("iteration", 0))
        except (TypeError, ValueError):  # a half-written field must not stop the watchdog
            return
        display.update(frames=frames, rate=rate, iteration=iteration, reward=None if reward is None else float(reward))

    def _check_heartbeats(self, statuses: list[dict | None], t_start: float) -> None:
        """Kill the first GMI silent for longer than the timeout; elastic then stops every other GMI.

        A GMI without a status file has no pid to kill yet (its worker writes one before importing anything,
        so only a process still being spawned lacks it): it is skipped, not declared hung, or the watchdog would
        stop watching with nothing killed while a really hung GMI ran on.
        """
        now = time.time()
        for gmi, s in zip(self.gmis, statuses, strict=True):
            if not s or not s.get("pid") or s.get("stage") == "done":
                continue
            silent = now - float(s.get("time", t_start))
            if silent > self.heartbeat_timeout_s:
                self.hang = Hang(gmi=gmi, silent_s=silent, stage=s.get("stage", "starting"))
                try:
                    os.kill(int(s["pid"]), signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return
