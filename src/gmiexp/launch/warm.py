"""Warm starts: GMI processes forked from a server that has already imported torch, the trainer and the simulator.

Most of a GMI's start is imports: torch, rl-games and envpool take ~5 s of the ~7 s between a launch and the
first epoch on a 2-core host, in every GMI, at every start. So the launcher hands elastic a function
entrypoint and multiprocessing's ``forkserver`` start method (the mechanism elastic and torch.multiprocessing
offer for it), and sets the server's preload to :mod:`gmiexp.launch.preload`, the role's module (rl-games' PPO,
rsl_rl's runner, ...) and the simulator's modules (:attr:`gmiexp.envs.Simulator.warm`): :func:`preloads`. The
server imports them once and lives as long as the launcher, so every GMI forks warm: the GMIs beyond the
cores' count at the first start, and every GMI of a re-shaped partition.

What a spawned GMI got from its fresh interpreter, a forked one gets here: the launcher's environment as it is
at this launch (not as it was when the server started), its working directory and cores, SIGTERM's default
action, line-buffered stdout, and ``python -u -m gmiexp.launch.worker <plan.yaml>`` as its command line (what
``ps``, the test helpers and the fake NVML look for). Importing the preloads touches no device (CUDA
initialises in the GMI, after its environment is applied), and a simulator that must be imported before torch
(Isaac Gym) starts cold, as does every run with ``launch.warm_start=false``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from multiprocessing import forkserver
from typing import Any

from gmiexp.envs import simulator
from gmiexp.launch import preemption, worker
from gmiexp.role import ROLES, load_role

PRELOAD = "gmiexp.launch.preload"  # imported by the server only (it also points the server's stdout at stderr)
WORKER = "gmiexp.launch.worker"
_lock = threading.Lock()


def enabled(plan: Any) -> bool:
    """Whether this plan's GMIs start warm: ``launch.warm_start`` and a simulator that may be imported ahead."""
    return bool(plan.launch.warm_start) and simulator(plan.task).fork_safe and not plan.launch.inprocess


def preloads(plan: Any) -> list[str]:
    """The server's imports: :data:`PRELOAD` (torch, the worker), the role's modules, the simulator's modules.

    A built-in role's module is what its GMIs import first (rl-games' agents for ``ppo`` and the experience roles,
    rsl_rl's runner for ``rslrl``): a run imports only its own trainer, about 4 s saved on a 2-core host for a
    run that does not use rl-games.
    """
    return [PRELOAD, *role_modules(plan.role), *simulator(plan.task).warm]


def role_modules(spec: str) -> list[str]:
    """The gmiexp modules a role's GMIs import: a built-in's own module, or those a user's role derives from.

    A user's role (``module:Class``, or registered from the user's module; imported at plan time,
    :func:`gmiexp.role.check_role`) is itself imported in its GMIs, not in the server: its module may touch a
    device or start threads at import. The gmiexp roles it subclasses (rl-games' PPO, the experience roles) are
    preloaded, as for the built-in role.
    """
    module = ROLES.module_of(spec)
    if module is not None and module.startswith("gmiexp."):
        return [module]
    bases = [c.__module__ for c in load_role(spec).__mro__ if c.__module__.startswith("gmiexp.")]
    return list(dict.fromkeys(bases))


def start(plan: Any) -> bool:
    """Start the server (if it is not running) so it imports while the launcher sets up; True when warm.

    The server's preload is fixed when it starts: a later plan with another simulator imports its own modules
    in each GMI. A server someone else started without :data:`PRELOAD` is not used (False: start cold).
    """
    if not enabled(plan):
        return False
    with _lock:
        server = forkserver._forkserver
        running = getattr(server, "_forkserver_pid", None) is not None
        if running:
            return PRELOAD in (getattr(server, "_preload_modules", None) or [])
        forkserver.set_forkserver_preload(preloads(plan))
        with _scheduler_signals_blocked():  # the server and the resource tracker keep them blocked for good
            forkserver.ensure_running()
    return True


@contextlib.contextmanager
def _scheduler_signals_blocked() -> Iterator[None]:
    """Block SIGTERM and the scheduler's warning while the server and resource tracker are started.

    Slurm signals every process of a job step: the server must outlive both, as long as the launcher lives (its
    GMIs die with it). A blocked mask survives fork and exec; this thread's signals stay pending, not lost.
    """
    sigs = {signal.SIGTERM, preemption.scheduler_signal()}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def entrypoint(plan: Any, plan_path: str) -> tuple[Callable[..., Any] | str, tuple[Any, ...], str]:
    """What elastic starts for each GMI: ``(entrypoint, args, start_method)``, warm when :func:`start` allows."""
    if start(plan):
        cwd, cpus = os.getcwd(), sorted(os.sched_getaffinity(0))
        return run_worker, (plan_path, LauncherEnvironment(), cwd, cpus), "forkserver"
    return sys.executable, ("-u", "-m", WORKER, plan_path), "spawn"


class LauncherEnvironment:
    """The launcher's environment when elastic starts a GMI (it is pickled then), as a spawned GMI inherits it.

    Elastic itself sets variables in the launcher between this module's call and the GMIs' start.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (dict(os.environ),)


def run_worker(plan_path: str, env: dict[str, str], cwd: str, cpus: list[int]) -> None:
    """A warm GMI's entry (elastic's function entrypoint, forked by the server): then as ``python -m`` worker."""
    from setproctitle import setproctitle

    setproctitle(f"{sys.executable} -u -m {WORKER} {plan_path}")  # first: it needs the environment untouched
    _leave_server()
    per_rank = _set_by_elastic()
    os.environ.clear()
    os.environ.update(env)
    os.environ.update(per_rank)
    os.chdir(cwd)
    os.sched_setaffinity(0, cpus)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    preemption.ignore_in_worker()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # elastic stops GMIs with SIGTERM
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, preemption.scheduler_signal()})
    rc = worker.main([plan_path])
    sys.stdout.flush()
    sys.stderr.flush()
    if rc:
        sys.exit(rc)


def _leave_server() -> None:
    """Close this process's copy of the server's lifeline (the launcher's end of its "alive" pipe).

    multiprocessing hands every forked child that end so the child could use the server too; a GMI never does,
    and while any GMI held it the server would not see the launcher die (it exits on that pipe's end of file),
    so its GMIs would not get their parent-death signal (:mod:`gmiexp.launch.lifeline`).
    """
    server = forkserver._forkserver
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None


def _set_by_elastic() -> dict[str, str]:
    """The variables elastic set for this rank: what differs from the server's own environment."""
    base = getattr(sys.modules.get(PRELOAD), "SERVER_ENV", None)
    if base is None:  # cannot happen through start(); keep elastic's own keys rather than lose the rank
        return {k: v for k, v in os.environ.items() if k in _ELASTIC_KEYS or k.startswith("TORCHELASTIC_")}
    return {k: v for k, v in os.environ.items() if base.get(k) != v}


_ELASTIC_KEYS = frozenset({"RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
                           "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                           "TORCH_NCCL_ASYNC_ERROR_HANDLING"})
