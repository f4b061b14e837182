"""Launcher-side thread: reads GMI status files, draws the progress bar, kills hung GMIs."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

from tqdm import tqdm

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
    n_gmis: int
    total_frames: int
    heartbeat_timeout_s: float
    interval_s: float = 0.5
    progress: bool = True
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
        bar = tqdm(total=self.total_frames, unit="frame", unit_scale=True, dynamic_ncols=True,
                   disable=not self.progress, file=sys.stderr, desc="gmiexp")
        t_start = time.time()
        try:
            while not self._stop.wait(self.interval_s):
                statuses = [read_status(self.run_dir, i) for i in range(self.n_gmis)]
                if self.hang is None:
                    self._check_heartbeats(statuses, t_start)
                try:
                    self._update_bar(bar, statuses)
                except (TypeError, ValueError, KeyError):  # a half-written field must not stop the watchdog
                    pass
        finally:
            bar.close()

    def _update_bar(self, bar: tqdm, statuses: list[dict | None]) -> None:
        s0 = statuses[0] if statuses else None
        if not s0:
            return
        frames = int(s0.get("frames", 0))
        bar.n = min(frames, bar.total) if bar.total else frames
        rate = float(s0.get("steps_per_s", 0.0))  # GMI 0 reports the global rate
        reward = s0.get("reward")
        post = {"steps/s": f"{rate:,.0f}", "it": s0.get("iteration", 0)}
        if reward is not None:
            post["reward"] = f"{reward:.2f}"
        bar.set_postfix(post, refresh=False)
        bar.refresh()

    def _check_heartbeats(self, statuses: list[dict | None], t_start: float) -> None:
        now = time.time()
        for gmi, s in enumerate(statuses):
            last = float(s["time"]) if s else t_start
            if s and s.get("stage") == "done":
                continue
            silent = now - last
            if silent > self.heartbeat_timeout_s:
                self.hang = Hang(gmi=gmi, silent_s=silent, stage=(s or {}).get("stage", "not started"))
                pid = (s or {}).get("pid")
                if pid:
                    try:  # elastic sees the failure and stops every other GMI
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                return
