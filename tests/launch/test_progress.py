"""Progress: a tqdm bar on a terminal; plain lines every launch.progress_interval_s when stderr is a file."""

from __future__ import annotations

import io
from pathlib import Path

from gmitest import run_cli

from gmiexp.launch.progress import Progress, ProgressBar, ProgressLines, make_progress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_only_every_interval_and_a_last_one() -> None:
    out, clock = io.StringIO(), Clock()
    lines = ProgressLines(total=1000, stream=out, interval_s=10.0, clock=clock)
    for step in range(25):  # 25 updates, one per second
        clock.t = step + 1.0
        lines.update(frames=40 * (step + 1), rate=40.0, iteration=step + 1, reward=None if step < 5 else 1.5)
    lines.close()
    text = out.getvalue()
    assert "\r" not in text
    rows = text.splitlines()
    assert len(rows) == 3  # at 10 s, at 20 s, and the final state at close
    assert rows[0].startswith("gmiexp progress: 400/1,000 frames (40%) | iteration 10 | 40 env steps/s")
    assert rows[-1].startswith("gmiexp progress: 1,000/1,000 frames (100%) | iteration 25")
    assert "reward 1.50" in rows[-1]


def test_display_follows_the_stream() -> None:
    assert isinstance(make_progress(10, True, 5.0, io.StringIO()), ProgressLines)
    assert type(make_progress(10, False, 5.0, Tty())) is Progress
    tty = Tty()
    bar = make_progress(100, True, 5.0, tty)
    assert isinstance(bar, ProgressBar)
    bar.update(frames=50, rate=10.0, iteration=1, reward=None)
    bar.close()
    assert "\r" in tty.getvalue() and "50.0/100" in tty.getvalue()


def test_redirected_run_logs_plain_lines(tmp_path: Path) -> None:
    """stderr captured to a pipe (not a terminal): no carriage-return frames, dated plain lines instead."""
    r = run_cli("task=Cartpole", "num_gpus=1", "gmis_per_gpu=1", "launch.inprocess=true", "num_envs=32",
                "max_iterations=6", "train.minibatch_size=256", "train.mini_epochs=1", "launch.progress=true",
                "launch.progress_interval_s=0.5", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "\r" not in r.stderr
    assert r.stdout.startswith("gmiexp ok:") and r.stdout.count("\n") == 1  # rl-games' prints went to stderr
    rows = [line for line in r.stderr.splitlines() if line.startswith("gmiexp progress: ")]
    assert rows and rows[-1].startswith("gmiexp progress: 3,072/3,072 frames (100%) | iteration 6")
