"""Run packed members: a queue of jobs, a pool of slots, one ``python -m gmiexp`` process group per job.

Each job is a normal gmiexp run in its own session (its own process group), so the launcher can stop
it as a whole; the terminal's Ctrl-C reaches the launcher only, which then SIGINTs every running job
(gmiexp stops its GMIs and quits its backend's daemons), SIGKILLs what is left after a grace period,
and starts nothing more. A job's stdout (its one-line summary) and stderr go to files in its run dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gmiexp.launch.lifeline import job_env
from gmiexp.pack.slots import Slot

STDOUT, STDERR = "stdout.log", "stderr.log"


@dataclass
class Job:
    """One multirun member: its number, overrides and run dir; filled in as it runs."""

    num: int
    overrides: list[str]
    run_dir: Path
    slot_overrides: Callable[[Slot], list[str]] = field(repr=False, default=lambda s: [])
    slot: Slot | None = None
    proc: subprocess.Popen | None = field(default=None, repr=False)
    start: float | None = None  # launcher clock (time.time()) when started / finished
    end: float | None = None
    returncode: int | None = None
    status: str = "queued"  # queued | running | ok | failed | interrupted | not started
    grown: list[tuple[float, Slot]] = field(default_factory=list)  # slots it grew into (recycle): when, which

    @property
    def wall_s(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start

    def summary(self) -> dict[str, Any]:
        try:
            return json.loads((self.run_dir / "summary.json").read_text())
        except (OSError, ValueError):
            return {}


def command(job: Job, slot: Slot, prefix: list[str]) -> list[str]:
    return [sys.executable, "-m", "gmiexp", *prefix, *job.overrides, *job.slot_overrides(slot),
            f"hydra.run.dir={job.run_dir}"]


def start(job: Job, slot: Slot, prefix: list[str]) -> None:
    job.run_dir.mkdir(parents=True, exist_ok=True)
    job.slot = slot
    with (job.run_dir / STDOUT).open("w") as out, (job.run_dir / STDERR).open("w") as err:
        # its own session (stopped as a whole), following this process: a kill -9 of it stops the job too
        job.proc = subprocess.Popen(command(job, slot, prefix), stdout=out, stderr=err, start_new_session=True,
                                    env=job_env())
    job.start, job.status = time.time(), "running"


def finish(job: Job, code: int) -> None:
    job.end, job.returncode = time.time(), code
    job.status = "ok" if code == 0 else "interrupted" if code == 130 else "failed"


def signal_group(job: Job, sig: int) -> None:
    if job.proc is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.proc.pid, sig)


def stop(jobs: list[Job], grace_s: float) -> None:
    """SIGINT every running job's group at once, wait up to ``grace_s`` for all, then SIGKILL the rest."""
    for j in jobs:
        signal_group(j, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    for j in jobs:
        assert j.proc is not None
        try:
            code = j.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            signal_group(j, signal.SIGKILL)
            code = j.proc.wait()
        signal_group(j, signal.SIGKILL)  # anything the job left in its group (a GMI that ignored SIGINT)
        finish(j, 130 if code in (130, -signal.SIGINT, -signal.SIGKILL) else code)
        j.status = "interrupted"


def pick(free: list[Slot], busy: list[Slot]) -> Slot:
    """The free slot on the GPU running the fewest jobs (``busy``: their slots), spreading members over GPUs."""
    load = {s.gpu: 0 for s in free}
    for slot in busy:
        if slot.gpu in load:
            load[slot.gpu] += 1
    best = min(free, key=lambda s: (load[s.gpu], s.index, s.gpu))
    free.remove(best)
    return best


def run_jobs(jobs: list[Job], slots: list[Slot], prefix: list[str], poll_s: float = 0.2,
             grace_s: float = 20.0, on_started: Callable[[Job], None] = lambda j: None,
             on_done: Callable[[Job], None] = lambda j: None,
             on_idle: Callable[[Slot, list[Job]], Job | None] | None = None) -> None:
    """Run every job, at most one per slot at a time; on KeyboardInterrupt stop them all and re-raise.

    ``on_idle``: a slot is free and nothing is queued; it may hand the slot to a running job (recycling),
    returning that job, which then holds the slot until it ends.
    """
    queue, free, running = deque(jobs), list(slots), []
    try:
        while queue or running:
            while queue and free:
                job = queue.popleft()
                start(job, pick(free, [j.slot for j in running if j.slot is not None]), prefix)
                running.append(job)
                on_started(job)
            time.sleep(poll_s)
            for job in list(running):
                assert job.proc is not None and job.slot is not None
                code = job.proc.poll()
                if code is not None:
                    finish(job, code)
                    running.remove(job)
                    free += [job.slot, *(slot for _, slot in job.grown)]
                    on_done(job)
            if on_idle is not None and not queue:
                for slot in list(free):
                    taker = on_idle(slot, running)
                    if taker is not None:
                        free.remove(slot)
                        taker.grown.append((time.time(), slot))
    except BaseException:
        stop(running, grace_s)
        for job in queue:
            job.status = "not started"
        raise
