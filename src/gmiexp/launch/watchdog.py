"""Launcher-side thread: reads GMI status files, shows progress (gmiexp.launch.progress), kills hung GMIs."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gmiexp.config import LaunchConfig
from gmiexp.launch.progress import Progress, first_return, make_progress, phase_of
from gmiexp.status import read_status


@dataclass
class Hang:
    """The GMI that stopped first, and the peers that fell silent waiting for it (in a collective, a channel)."""

    gmi: int
    silent_s: float
    stage: str
    stopped: bool = False  # its process was stopped (SIGSTOP, a debugger): it could not even act on SIGTERM
    waiting: list[tuple[int, float, str]] = field(default_factory=list)  # (gmi, silent_s, stage) of its peers

    def describe(self, name: Callable[[int], str] = "GMI {}".format) -> str:
        """``... hung: no heartbeat for 15.2s (stage 'training', process stopped); GMI 0 waited on it (...)``."""
        what = f"stage '{self.stage}'" + (", process stopped (SIGSTOP)" if self.stopped else "")
        text = f"{name(self.gmi)} hung: no heartbeat for {self.silent_s:.1f}s ({what})"
        if self.waiting:
            peers = ", ".join(f"{name(g)} (silent {s:.1f}s, stage '{st}')" for g, s, st in self.waiting)
            text += f"; waiting on it: {peers}"
        return text


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
    live: Any = None  # gmiexp.launch.live.LiveLog: run rows sent to W&B/TensorBoard as they come; the bar shows them
    hang: Hang | None = None
    complete: bool = False  # set by the launcher when every GMI finished: the display ends at 100%
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _start: float | None = None  # the run's first return, once a run row has one (the display's "return a -> b")

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
                self._poll_live()
                self._show(display, statuses)
            self._poll_live()
            self._show(display, [read_status(self.run_dir, i) for i in self.gmis])  # the final state
        finally:
            display.close()

    def _poll_live(self) -> None:
        if self.live is None:
            return
        try:
            self.live.poll()
        except Exception as e:  # noqa: BLE001 - a half-written history must not stop the watchdog
            print(f"gmiexp: live metrics: {e}", file=sys.stderr, flush=True)

    def _show(self, display: Progress, statuses: list[dict | None]) -> None:
        """The run's row (frames, env steps/s, iteration, reward) once it trains, else the phase it waits in.

        A GMI that knows the run's frames better than the Plan says so in its status (``total_frames``: rsl_rl's
        ``num_steps_per_env`` comes from a recipe read in the GMIs), and the display counts to that.
        """
        total = next((int(s["total_frames"]) for s in statuses if s and s.get("total_frames")), None)
        if total is not None and total != self.total_frames:
            self.total_frames = total
            display.retotal(total)
        row = self.live.last if self.live is not None else None
        if row is None:
            s0 = statuses[0] if statuses else None
            if s0 and int(s0.get("iteration", 0) or 0) > 0 and self.live is None:
                display.update(frames=int(s0.get("frames", 0)), rate=float(s0.get("steps_per_s", 0.0)),
                               iteration=int(s0.get("iteration", 0)), reward=s0.get("reward"))
            else:
                display.update(frames=0, rate=0.0, iteration=0, reward=None,
                               phase=phase_of([s.get("stage") if s else None for s in statuses]))
            return
        reward = row.get("reward/mean")
        frames = int(row.get("frames", 0))
        if self.complete:
            display.finished(frames)
        display.update(frames=frames, rate=float(row.get("perf/env_steps_per_s", 0.0)),
                       iteration=int(row.get("iteration", 0)), reward=None if reward is None else float(reward),
                       start=self._first_return())

    def _first_return(self) -> float | None:
        if self._start is None:  # scanned until a row has one, then kept: rows only grow
            self._start = first_return(self.live.all_rows)
        return self._start

    def _check_heartbeats(self, statuses: list[dict | None], t_start: float) -> None:
        """Once a GMI is silent for longer than the timeout, find the one that stopped first and SIGKILL them all.

        When one GMI stops, its peers soon wait for it (a gradient collective, a channel, the weight board) and
        fall silent too, so the first silent GMI by id is often a victim. The culprit is a stopped process if there
        is one (SIGSTOP), else the GMI whose last heartbeat is the oldest: the others beat on until they reached
        what waits for it. It is named; every GMI of this node is killed with SIGKILL (a stopped process does not
        act on SIGTERM, and the waiting ones would only wait), so all are gone moments after the timeout.

        A GMI without a status file has no pid to kill yet (its worker writes one before importing anything,
        so only a process still being spawned lacks it): it is skipped, not declared hung, or the watchdog would
        stop watching with nothing killed while a really hung GMI ran on.
        """
        now = time.time()
        watched = []  # (gmi, status, silent seconds, stopped)
        for gmi, s in zip(self.gmis, statuses, strict=True):
            if not s or not s.get("pid") or s.get("stage") == "done":
                continue
            watched.append((gmi, s, now - float(s.get("time", t_start))))
        if not any(silent > self.heartbeat_timeout_s for _, _, silent in watched):
            return
        stopped = {gmi for gmi, s, _ in watched if _is_stopped(int(s["pid"]))}
        gmi, s, silent = max(watched, key=lambda w: (w[0] in stopped, w[2]))
        waiting = [(g, sl, str(st.get("stage", "starting"))) for g, st, sl in watched
                   if g != gmi and sl > self.interval_s + 1.0]
        self.hang = Hang(gmi=gmi, silent_s=silent, stage=s.get("stage", "starting"), stopped=gmi in stopped,
                         waiting=waiting)
        for _, st, _ in sorted(watched, key=lambda w: w[0] != gmi):  # the culprit first
            try:
                os.kill(int(st["pid"]), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _is_stopped(pid: int) -> bool:
    """True when ``pid`` is stopped (SIGSTOP, SIGTSTP, a tracer): it runs no code, not even a signal handler."""
    import psutil

    try:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except psutil.Error:
        return False
