"""The watchdog kills a silent GMI even while another GMI has not written its first status yet, and shows the run's
progress to the total its GMIs report."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from gmiexp.launch.progress import ProgressLines
from gmiexp.launch.watchdog import Watchdog
from gmiexp.status import StatusWriter


def test_a_gmi_without_status_does_not_blind_the_watchdog(tmp_path: Path) -> None:
    hung = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        w = StatusWriter(tmp_path, 1)  # GMI 1 beat once, long ago, from the hung process
        w.fields["pid"] = hung.pid
        w.beat(force=True)
        dog = Watchdog(str(tmp_path), gmis=[0, 1], total_frames=1, heartbeat_timeout_s=1.0, progress=False)
        t_start = time.time() - 10  # GMI 0 (no status file: still being spawned) is silent "since" then
        statuses = [None, {**w.fields, "time": time.time() - 5}]
        dog._check_heartbeats(statuses, t_start)
        assert dog.hang is not None and dog.hang.gmi == 1
        assert hung.wait(timeout=10) == -9
    finally:
        hung.kill()
        hung.wait()


def test_a_gmi_that_beats_is_left_alone(tmp_path: Path) -> None:
    dog = Watchdog(str(tmp_path), gmis=[0], total_frames=1, heartbeat_timeout_s=5.0, progress=False)
    dog._check_heartbeats([{"pid": 1, "time": time.time(), "stage": "running"}], time.time() - 60)
    assert dog.hang is None


def test_the_progress_line_counts_to_the_total_a_gmi_reports(tmp_path: Path) -> None:
    """train=rslrl's Go1: the Plan counts train.horizon_length (16) steps, rsl_rl's recipe 24; the GMIs say so."""
    out = io.StringIO()
    lines = ProgressLines(total=24_576, stream=out, interval_s=0.0)
    live = SimpleNamespace(last={"frames": 12_288, "iteration": 1, "perf/env_steps_per_s": 100.0}, all_rows=[])
    dog = Watchdog(str(tmp_path), gmis=[0, 1], total_frames=24_576, heartbeat_timeout_s=5.0, progress=False,
                   live=live)
    dog._show(lines, [{"stage": "training", "total_frames": 36_864}, None])
    assert out.getvalue().startswith("gmiexp progress: 12,288/36,864 frames (33%) | iteration 1 |")
