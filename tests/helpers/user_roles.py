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
