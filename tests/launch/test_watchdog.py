"""The watchdog kills a silent GMI even while another GMI has not written its first status yet."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

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
