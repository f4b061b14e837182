"""Run progress on stderr: a tqdm bar on a terminal, plain lines every N seconds when stderr is a file or pipe.

A bar redraws itself with carriage returns several times a second; written to a log file that becomes hundreds
of frames on one line. Without a terminal nobody watches the redraw, so a dated line now and then says more.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

from tqdm import tqdm

#: what the launcher waits for before the first epoch, from the GMIs' status ``stage`` (None: no status file yet)
PHASES = {None: "spawning GMIs", "starting": "importing", "rendezvous": "joining the GMIs",
          "running": "building simulators", "training": "first epoch"}


def first_return(rows: list[dict[str, Any]]) -> float | None:
    """The run's return at the start: the first run row's ``reward/mean`` (None before an episode ends)."""
    return next((float(r["reward/mean"]) for r in rows if r.get("reward/mean") is not None), None)


def return_text(start: float | None, now: float | None) -> str:
    """``return <start> -> <now>``: the progress and the last line show whether the policy learned, not one number."""
    if now is None:
        return "return n/a"
    return f"return {now:.1f}" if start is None else f"return {start:.1f} -> {now:.1f}"


def phase_of(stages: list[str | None]) -> str:
    """The phase of the slowest GMI (the run waits for it): the earliest in :data:`PHASES`' order."""
    order = list(PHASES)
    known = [s for s in stages if s in PHASES]
    if len(known) < len(stages) or not stages:
        return PHASES[None]
    return PHASES[min(known, key=order.index)]


class Progress:
    """No display (``launch.progress=false``); base class of the two real ones.

    ``rate`` is the run's ``perf/env_steps_per_s`` so far (the summary's figure); ``phase`` names what the run
    waits for before its first epoch (None once it trains).
    """

    def update(self, frames: int, rate: float, iteration: int, reward: float | None, phase: str | None = None,
               start: float | None = None) -> None:
        """``reward``: the return now; ``start``: the run's first (:func:`first_return`)."""

    def finished(self, frames: int) -> None:
        """Every GMI finished: ``frames`` is the whole run (100%), whatever the planned total was."""

    def retotal(self, total: int) -> None:
        """The run's total as its GMIs count it (a library whose steps per iteration the Plan does not know)."""

    def close(self) -> None:
        pass


class ProgressBar(Progress):
    """tqdm bar for a terminal."""

    def __init__(self, total: int, stream: TextIO) -> None:
        # one rate on the terminal: the run's env steps/s (tqdm's own frame/s is left out of the format)
        self.bar = tqdm(total=total, unit="frame", unit_scale=True, dynamic_ncols=True, file=stream,
                        desc=f"gmiexp: {PHASES[None]}",
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} frames "
                                   "[{elapsed}<{remaining}{postfix}]")

    def update(self, frames: int, rate: float, iteration: int, reward: float | None, phase: str | None = None,
               start: float | None = None) -> None:
        self.bar.n = min(frames, self.bar.total) if self.bar.total else frames
        self.bar.set_description_str(f"gmiexp: {phase}" if phase else "gmiexp", refresh=False)
        post: dict[str, Any] = {"env steps/s": f"{rate:,.0f}", "it": iteration}
        if reward is not None:
            post["return"] = return_text(start, reward).removeprefix("return ")
        self.bar.set_postfix(post, refresh=False)
        self.bar.refresh()

    def finished(self, frames: int) -> None:
        self.bar.total = frames

    def retotal(self, total: int) -> None:
        self.bar.total = total

    def close(self) -> None:
        self.bar.close()


class ProgressLines(Progress):
    """One plain line every ``interval_s`` seconds (and a last one at the end) for logs and pipes."""

    def __init__(self, total: int, stream: TextIO, interval_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.stream, self.interval_s, self.clock = total, stream, interval_s, clock
        self.t0 = self.last_t = clock()
        self.last: tuple[int, float, int, float | None, float | None] | None = None
        self.printed: tuple[int, float, int, float | None, float | None] | None = None
        self.phase: str | None = None

    def update(self, frames: int, rate: float, iteration: int, reward: float | None, phase: str | None = None,
               start: float | None = None) -> None:
        if phase is not None:  # before the first epoch: say what the run waits for, once per phase
            if phase != self.phase:
                self.phase = phase
                print(f"gmiexp progress: {phase} | {self.clock() - self.t0:.0f}s", file=self.stream, flush=True)
            return
        self.last = (frames, rate, iteration, reward, start)
        if self.clock() - self.last_t >= self.interval_s:
            self._print()

    def finished(self, frames: int) -> None:
        self.total = frames
        self.printed = None  # the last line is printed again, at 100%

    def retotal(self, total: int) -> None:
        self.total = total

    def close(self) -> None:
        if self.last is not None and self.last != self.printed:
            self._print()

    def _print(self) -> None:
        assert self.last is not None
        frames, rate, iteration, reward, start = self.last
        pct = f" ({100 * frames / self.total:.0f}%)" if self.total else ""
        rtxt = f" | {return_text(start, reward)}" if reward is not None else ""
        print(f"gmiexp progress: {frames:,}/{self.total:,} frames{pct} | iteration {iteration} | "
              f"{rate:,.0f} env steps/s{rtxt} | {self.clock() - self.t0:.0f}s", file=self.stream, flush=True)
        self.last_t, self.printed = self.clock(), self.last


def make_progress(total: int, enabled: bool, interval_s: float, stream: TextIO) -> Progress:
    """The display for ``stream``: none, a bar on a terminal, else plain lines every ``interval_s``."""
    if not enabled:
        return Progress()
    if stream.isatty():
        return ProgressBar(total, stream)
    return ProgressLines(total, stream, interval_s)
