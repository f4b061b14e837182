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
        lines.update(frames=40 * (step + 1), rate=40.0, iteration=step + 1, reward=None if step < 5 else 1.5 + step,
                     start=None if step < 5 else 6.5)
    lines.close()
    text = out.getvalue()
    assert "\r" not in text
    rows = text.splitlines()
    assert len(rows) == 3  # at 10 s, at 20 s, and the final state at close
    assert rows[0].startswith("gmiexp progress: 400/1,000 frames (40%) | iteration 10 | 40 env steps/s")
    assert rows[-1].startswith("gmiexp progress: 1,000/1,000 frames (100%) | iteration 25")
    assert rows[-1].endswith("| return 6.5 -> 25.5 | 25s")  # the return at the start and now: did it learn?


def test_display_follows_the_stream() -> None:
    assert isinstance(make_progress(10, True, 5.0, io.StringIO()), ProgressLines)
    assert type(make_progress(10, False, 5.0, Tty())) is Progress
    tty = Tty()
    bar = make_progress(100, True, 5.0, tty)
    assert isinstance(bar, ProgressBar)
    bar.update(frames=50, rate=10.0, iteration=1, reward=None)
    bar.update(frames=60, rate=10.0, iteration=2, reward=5.0, start=1.25)
    bar.close()
    assert "\r" in tty.getvalue() and "50.0/100" in tty.getvalue()
    assert "return=1.2 -> 5.0" in tty.getvalue()  # the bar shows the return at the start and now too


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
    assert " | return " in rows[-1] and " -> " in rows[-1]
    assert " | return " in r.stdout and " -> " in r.stdout


def test_phase_is_the_slowest_gmis() -> None:
    from gmiexp.launch.progress import phase_of

    assert phase_of([None, "training"]) == "spawning GMIs"
    assert phase_of(["starting", "rendezvous"]) == "importing"
    assert phase_of(["running", "training"]) == "building simulators"
    assert phase_of(["training", "training"]) == "first epoch"


def test_lines_name_each_phase_once_before_the_first_epoch() -> None:
    out, clock = io.StringIO(), Clock()
    lines = ProgressLines(total=100, stream=out, interval_s=10.0, clock=clock)
    for phase in ("spawning GMIs", "spawning GMIs", "importing", "first epoch"):
        lines.update(frames=0, rate=0.0, iteration=0, reward=None, phase=phase)
    lines.update(frames=50, rate=5.0, iteration=1, reward=None)
    lines.close()
    rows = out.getvalue().splitlines()
    assert [r.split(" | ")[0] for r in rows[:3]] == ["gmiexp progress: spawning GMIs", "gmiexp progress: importing",
                                                   "gmiexp progress: first epoch"]
    assert rows[3].startswith("gmiexp progress: 50/100 frames (50%)") and len(rows) == 4


def test_bar_shows_one_rate_and_the_phase() -> None:
    tty = Tty()
    bar = ProgressBar(100, tty)
    bar.update(frames=0, rate=0.0, iteration=0, reward=None, phase="importing")
    assert "gmiexp: importing" in tty.getvalue()
    bar.update(frames=50, rate=1234.0, iteration=1, reward=None)
    bar.close()
    text = tty.getvalue()
    assert "env steps/s=1,234" in text and "frame/s" not in text and "it/s" not in text


def test_a_finished_run_ends_at_100_percent_of_its_frames() -> None:
    out = io.StringIO()
    lines = ProgressLines(total=1000, stream=out, interval_s=10.0, clock=Clock())
    lines.update(frames=470, rate=5.0, iteration=10, reward=None)  # fewer frames than planned (experience layouts)
    lines._print()  # the last state was printed already (at 47%) before the run finished
    lines.finished(470)
    lines.update(frames=470, rate=5.0, iteration=10, reward=None)
    lines.close()
    assert out.getvalue().splitlines()[-1].startswith("gmiexp progress: 470/470 frames (100%)")
