"""A scheduler's warning signal is the launcher's to act on; a GMI ignores it.

Slurm delivers ``sbatch --signal=SIG@T`` and ``scancel --signal=SIG`` (without ``B:``) to every process of
the job step, the GMI workers included. hydra-submitit-launcher's jobs ask for ``USR2@signal_delay_s``
(``$SUBMITIT_PREEMPT_SIGNAL`` picks another) and handle it in the launcher process: submitit calls the
launcher's ``checkpoint()``, requeues the job and exits; elastic then stops the GMIs with SIGTERM, and the
requeued job resumes from the run's latest checkpoint (:mod:`gmiexp.launch.requeue`). A GMI must not die
of that signal first (SIGUSR2's default action is to terminate, and a GMI dying makes the attempt a
failure), so workers ignore it. The launcher-death signal of :mod:`gmiexp.launch.lifeline` is one no
scheduler sends.
"""

from __future__ import annotations

import os
import signal

#: submitit's variable naming its preemption/timeout signal, and its default (submitit.JobEnvironment.USR_SIG)
SUBMITIT_SIGNAL_ENV, SUBMITIT_DEFAULT = "SUBMITIT_PREEMPT_SIGNAL", "USR2"


def scheduler_signal() -> signal.Signals:
    """The signal submitit (and so a gmiexp Slurm job) uses to warn of preemption or a time limit."""
    name = os.environ.get(SUBMITIT_SIGNAL_ENV, SUBMITIT_DEFAULT)
    return getattr(signal, f"SIG{name}", signal.SIGUSR2)


def ignore_in_worker() -> None:
    """Leave the scheduler's warning to the launcher (call first thing in a GMI process)."""
    signal.signal(scheduler_signal(), signal.SIG_IGN)
