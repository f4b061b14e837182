"""Moving a running process tree to other cores without a restart: every thread re-pinned."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from gmiexp.launch.affinity import move_cores, threads

CORES = sorted(os.sched_getaffinity(0))
THREADED = ("import threading, time\n"
            "[threading.Thread(target=time.sleep, args=(60,), daemon=True).start() for _ in range(3)]\n"
            "print('ready', flush=True)\ntime.sleep(60)\n")


@pytest.mark.skipif(len(CORES) < 2, reason="needs two cores")
def test_every_thread_of_a_running_tree_moves_to_the_new_core() -> None:
    a, b = CORES[:2]
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time\n"
                               f"c = subprocess.Popen([sys.executable, '-c', {THREADED!r}])\n{THREADED}"],
                              stdout=subprocess.PIPE, text=True, preexec_fn=lambda: os.sched_setaffinity(0, {a}))
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        procs = [parent.pid, *(p.pid for p in psutil.Process(parent.pid).children(recursive=True))]
        tids = [t for p in procs for t in threads(p)]
        assert len(tids) >= 4 and {frozenset(os.sched_getaffinity(t)) for t in tids} == {frozenset({a})}
        assert move_cores([a], [b], parent.pid) >= 4
        assert {frozenset(os.sched_getaffinity(t)) for p in procs for t in threads(p)} == {frozenset({b})}
        assert move_cores([a], [b], parent.pid) == 0  # nothing left on the old core
    finally:
        for p in psutil.Process(parent.pid).children(recursive=True):
            p.kill()
        parent.kill()
        parent.wait()


def test_a_live_move_keeps_the_core_count() -> None:
    with pytest.raises(ValueError, match="1 cores onto 2; a live move keeps the count"):
        move_cores([0], [0, 1])
