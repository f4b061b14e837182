"""Roles launched by the tests (importable in the workers through PYTHONPATH)."""

from __future__ import annotations

import json
import time

import torch

from gmiexp.role import Role


class CheckRole(Role):
    """Exercises allreduce, send and recv; writes what it received."""

    def run(self) -> dict:
        n = self.plan.world_size
        me = self.gmi_id
        t = torch.full((5,), float(me + 1))
        summed = self.allreduce(t.clone())
        mean = self.allreduce(torch.full((2, 3), float(me)), average=True)
        nxt, prv = (me + 1) % n, (me - 1) % n
        like = torch.zeros(4)
        if me % 2 == 0:
            self.send(torch.arange(4.0) + 10 * me, nxt)
            got = self.recv(like, prv)
        else:
            got = self.recv(like, prv)
            self.send(torch.arange(4.0) + 10 * me, nxt)
        out = {"sum": summed.tolist(), "mean": mean.reshape(-1).tolist(), "from_prev": got.tolist()}
        (self.ctx.run_dir / f"role_{me}.json").write_text(json.dumps(out))
        return {"ok": 1}


class HangRole(Role):
    """GMI 1 stops beating (simulates a deadlock); the others keep beating."""

    def run(self) -> dict:
        end = time.time() + 120
        while time.time() < end:
            if self.gmi_id != 1:
                self.heartbeat(stage="spinning")
            time.sleep(0.2)
        return {}


class SleepRole(Role):
    """Beats for a long time; used for kill and Ctrl-C tests."""

    def run(self) -> dict:
        end = time.time() + 120
        while time.time() < end:
            self.heartbeat(stage="sleeping")
            time.sleep(0.1)
        return {}


class FailRole(Role):
    """Raises at once: a job that fails (exit code 1), for multirun exit-code tests."""

    def run(self) -> dict:
        raise RuntimeError("FailRole fails on purpose")


class RefuseRole(Role):
    """The last GMI finds its input bad once it runs (as a task.vec_env a GMI imports); the others beat meanwhile."""

    def run(self) -> dict:
        from gmiexp.errors import ConfigError

        if self.gmi_id == self.plan.world_size - 1:
            time.sleep(1.0 if self.gmi_id else 0.0)  # the others are running: the launcher must stop them
            raise ConfigError("invalid task.env_config key: 'nosuch'; the environment config has no 'nosuch'")
        end = time.time() + 120
        while time.time() < end:
            self.heartbeat(stage="sleeping")
            time.sleep(0.1)
        return {}


class ProcessRole(Role):
    """Writes what its process looks like (environment, cwd, cores, signals, parent, command line)."""

    def run(self) -> dict:
        import os
        import signal
        import sys

        import psutil

        me = psutil.Process()
        parent = me.parent()
        out = {"env": dict(os.environ), "cwd": os.getcwd(), "cpus": sorted(os.sched_getaffinity(0)),
               "sigterm": str(signal.getsignal(signal.SIGTERM)), "sigint": str(signal.getsignal(signal.SIGINT)),
               "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
               "line_buffered": sys.stdout.line_buffering, "cmdline": me.cmdline(), "pid": os.getpid(),
               "ppid": os.getppid(), "parent_cmdline": parent.cmdline() if parent else [],
               "torch_threads": torch.get_num_threads()}
        (self.ctx.run_dir / f"process_{self.gmi_id}_{os.getpid()}.json").write_text(json.dumps(out))
        return {"ok": 1}
