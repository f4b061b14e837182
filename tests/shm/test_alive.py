"""pid_alive: running, exited, zombie, unbound."""

import os
import subprocess
import sys

from gmiexp.shm.alive import pid_alive


def test_self_and_unbound_peer_are_alive():
    assert pid_alive(os.getpid()) and pid_alive(0)


def test_running_zombie_and_reaped_child():
    p = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    assert pid_alive(p.pid)
    p.stdin.close()
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    assert not pid_alive(p.pid)
    p.wait()
    assert not pid_alive(p.pid)
