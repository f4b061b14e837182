"""Slurm's requeue warning (submitit's SIGUSR2) reaches every GMI; a GMI ignores it and still dies with its launcher."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")
# A stand-in GMI as the worker starts: the scheduler's signal left to the launcher, then bound to the launcher.
GMI = """
import os, sys, time
from gmiexp.launch import lifeline, preemption
preemption.ignore_in_worker()
lifeline.bind(lambda: None, launcher=sys.argv[1])
print("ready", flush=True)
time.sleep(60)
"""


def start_gmi(launcher: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    p = subprocess.Popen([sys.executable, "-c", GMI, launcher], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_a_gmi_outlives_the_schedulers_warning_signal() -> None:
    from gmiexp.launch import lifeline

    gmi = start_gmi(lifeline.identity())  # this test process stands for the launcher
    try:
        gmi.send_signal(signal.SIGUSR2)  # what Slurm sends every process of the step before preemption
        time.sleep(1.0)
        assert gmi.poll() is None, f"the GMI left on SIGUSR2 (exit code {gmi.returncode})"
    finally:
        gmi.kill()
        gmi.wait()


def test_the_launcher_death_signal_is_still_heard() -> None:
    from gmiexp.launch import lifeline

    gmi = start_gmi(lifeline.identity())
    try:
        gmi.send_signal(lifeline.SIGNAL)  # what the kernel sends when the launcher dies (PR_SET_PDEATHSIG)
        assert gmi.wait(timeout=10) == lifeline.EXIT_CODE
    finally:
        if gmi.poll() is None:
            gmi.kill()
            gmi.wait()
