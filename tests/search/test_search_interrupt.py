"""Ctrl-C or SIGTERM of a running search stops the profile run it waits on (profiles run in their own session)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from gmitest import gmiexp_workers, popen_cli


@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_interrupting_a_search_stops_its_profile_run(sig: int, tmp_path: Path, no_orphans: None) -> None:
    # SleepRole beats for 120 s: the profile is still running when the search is interrupted.
    p = popen_cli("mode=search", "role=user_roles:SleepRole", "task=Cartpole", "search.grid=true",
                  "search.max_gmis_per_gpu=1", "search.num_envs=[32]", "search.min_profile_steps=0",
                  "search.cache=false", f"hydra.run.dir={tmp_path}")
    try:
        deadline = time.time() + 120
        while not gmiexp_workers(tmp_path) and time.time() < deadline and p.poll() is None:
            time.sleep(0.2)
        workers = gmiexp_workers(tmp_path)
        assert workers, "the profile run never started a GMI"
        os.kill(p.pid, sig)  # the search process only, as a terminal's Ctrl-C reaches it (not the profile's session)
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err[-2000:]
    assert not [w for w in workers if w.is_running() and w.status() != "zombie"]
