"""Run progress on stderr: a tqdm bar on a terminal, plain lines every N seconds when stderr is a file or pipe.

A bar redraws itself with carriage returns several times a second; written to a log file that becomes hundreds
of frames on one line. Without a terminal nobody watches the redraw, so a dated line now and then says more.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

from tqdm import tqdm


class Progress:
    """No display (``launch.progress=false``); base class of the two real ones."""

    def update(self, frames: int, rate: float, iteration: int, reward: float | None) -> None:
        pass

    def close(self) -> None:
        pass


class ProgressBar(Progress):
    """tqdm bar for a terminal."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.bar = tqdm(total=total, unit="frame", unit_scale=True, dynamic_ncols=True, file=stream, desc="gmiexp")

    def update(self, frames: int, rate: float, iteration: int, reward: float | None) -> None:
        self.bar.n = min(frames, self.bar.total) if self.bar.total else frames
        post: dict[str, Any] = {"steps/s": f"{rate:,.0f}", "it": iteration}
        if reward is not None:
            post["reward"] = f"{reward:.2f}"
        self.bar.set_postfix(post, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


class ProgressLines(Progress):
    """One plain line every ``interval_s`` seconds (and a last one at the end) for logs and pipes."""

    def __init__(self, total: int, stream: TextIO, interval_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.stream, self.interval_s, self.clock = total, stream, interval_s, clock
        self.t0 = self.last_t = clock()
        self.last: tuple[int, float, int, float | None] | None = None
        self.printed: tuple[int, float, int, float | None] | None = None

    def update(self, frames: int, rate: float, iteration: int, reward: float | None) -> None:
        self.last = (frames, rate, iteration, reward)
        if self.clock() - self.last_t >= self.interval_s:
            self._print()

    def close(self) -> None:
        if self.last is not None and self.last != self.printed:
            self._print()

    def _print(self) -> None:
        assert self.last is not None
        frames, rate, iteration, reward = self.last
        pct = f" ({100 * frames / self.total:.0f}%)" if self.total else ""
        rtxt = f" | reward {reward:.2f}" if reward is not None else ""
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
