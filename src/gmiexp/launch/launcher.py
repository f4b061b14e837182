"""Run a Plan: backend session around torch.distributed.elastic, one process per GMI.

elastic (the engine behind torchrun) spawns the workers, gives them ranks and
a rendezvous on 127.0.0.1, captures their logs and stops them all when one
fails. gmiexp adds the backend's set-up/tear-down, heartbeats (a hung GMI is
killed, which elastic then treats as a failure), the progress bar and the
summary.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from gmiexp.backends.base import Backend
from gmiexp.errors import Interrupted, LaunchError
from gmiexp.launch import lifeline, status
from gmiexp.launch.summary import build_summary
from gmiexp.launch.watchdog import Watchdog
from gmiexp.plan import Plan
from gmiexp.shm.cleanup import cleanup_run, sweep_dead_runs
from gmiexp.shm.names import launcher_tag


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def frames_per_iteration(plan: Plan) -> int:
    return plan.total_envs() * int(plan.train.horizon_length)


def log_tail(run_dir: Path, gmi: int, lines: int = 25) -> str:
    """Last lines of a GMI's captured stderr+stdout (elastic writes <log_dir>/<run>/attempt_0/<rank>/)."""
    chunks = []
    for name in ("stderr.log", "stdout.log"):
        for p in sorted((run_dir / "logs").glob(f"*/attempt_*/{gmi}/{name}")):
            text = p.read_text(errors="replace").splitlines()
            if text:
                chunks.append(f"--- {p.relative_to(run_dir)} (last {min(lines, len(text))} lines) ---")
                chunks.extend(text[-lines:])
    return "\n".join(chunks) or "(no log output)"


def _elastic(plan: Plan, run_dir: Path, plan_path: Path) -> None:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    port = int(plan.launch.master_port or 0) or free_port()
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=plan.world_size,
        run_id=f"gmiexp-{uuid.uuid4().hex[:8]}",
        rdzv_backend="c10d",
        rdzv_endpoint=f"127.0.0.1:{port}",
        local_addr="127.0.0.1",
        max_restarts=0,
        monitor_interval=float(plan.launch.monitor_interval_s),
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(run_dir / "logs"), redirects=Std.ALL, tee=Std.NONE),
        shutdown_timeout=5,
    )
    elastic_launch(config, sys.executable)("-u", "-m", "gmiexp.launch.worker", str(plan_path))


def _describe_failure(err: Exception, run_dir: Path, watchdog: Watchdog) -> LaunchError:
    if watchdog.hang is not None:
        h = watchdog.hang
        head = (f"GMI {h.gmi} hung: no heartbeat for {h.silent_s:.1f}s (stage '{h.stage}', "
                f"limit launch.heartbeat_timeout_s={watchdog.heartbeat_timeout_s:g}); every GMI was stopped")
        return LaunchError(f"{head}\n{log_tail(run_dir, h.gmi)}")
    failures = getattr(err, "failures", {}) or {}
    if failures:
        rank, f = min(failures.items(), key=lambda kv: kv[1].timestamp)
        head = f"GMI {rank} failed (exit code {f.exitcode}, pid {f.pid}); every GMI was stopped"
        return LaunchError(f"{head}\n{log_tail(run_dir, rank)}")
    return LaunchError(f"launch failed: {err}")


def launch(plan: Plan, backend: Backend, run_dir: Path) -> dict[str, Any]:
    """Execute ``plan``; return the summary (also written to ``summary.json``). Raises LaunchError."""
    from gmiexp.tools.monitor import Monitor

    if plan.launch.inprocess and plan.world_size != 1:
        from gmiexp.errors import ConfigError

        raise ConfigError(f"invalid launch.inprocess=true with {plan.world_size} GMIs; valid: a 1-GMI plan")
    run_dir.mkdir(parents=True, exist_ok=True)
    status.reset(run_dir)
    lc = plan.launch
    watchdog = Watchdog(
        run_dir=str(run_dir), n_gmis=plan.world_size,
        total_frames=frames_per_iteration(plan) * plan.max_iterations,
        heartbeat_timeout_s=float(lc.heartbeat_timeout_s),
        interval_s=float(lc.monitor_interval_s), progress=bool(lc.progress),
        progress_interval_s=float(lc.progress_interval_s),
    )
    monitor = Monitor(backend.hardware, interval_s=max(0.5, float(lc.monitor_interval_s)),
                      gmi_devices={g.id: g.device for g in plan.gmis},
                      pids=lambda: status.gmi_pids(run_dir, plan.world_size))
    # shared-memory segments of this run are named /dev/shm/gmiexp_<tag>_*; workers inherit the tag,
    # and the launcher's identity, so they die with it (launch/lifeline.py)
    swept = sweep_dead_runs()
    if swept:
        print(f"gmiexp: removed {len(swept)} shared-memory segment(s) of killed runs", file=sys.stderr)
    previous = {k: os.environ.get(k) for k in ("GMIEXP_RUN_TAG", lifeline.ENV)}
    tag = os.environ["GMIEXP_RUN_TAG"] = launcher_tag()
    os.environ[lifeline.ENV] = lifeline.identity()
    t0 = time.perf_counter()
    try:
        with backend.session(plan, run_dir):
            return _run_session(plan, run_dir, watchdog, monitor, t0)
    finally:
        cleanup_run(tag)  # segments a crashed GMI could not unlink
        for k, v in previous.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run_session(plan: Plan, run_dir: Path, watchdog: Watchdog, monitor: Any, t0: float) -> dict[str, Any]:
    from torch.distributed.elastic.multiprocessing.api import SignalException

    lc = plan.launch
    plan_path = plan.save(run_dir / "plan.yaml")  # after set-up: MIG creation fills instance UUIDs
    watchdog.start()
    monitor.start()
    try:
        if lc.inprocess:
            _inprocess(plan)
        else:
            _elastic(plan, run_dir, plan_path)
    except SignalException as sig:
        raise Interrupted(f"stopped by signal {sig.sigval.name}; every GMI was stopped") from None
    except KeyboardInterrupt:
        raise Interrupted("interrupted (Ctrl-C); every GMI was stopped") from None
    except Exception as err:  # ChildFailedError and friends
        raise _describe_failure(err, run_dir, watchdog) from None
    finally:
        watchdog.stop()
        host_metrics = monitor.stop()
    if watchdog.hang is not None:
        raise _describe_failure(RuntimeError("hang"), run_dir, watchdog)
    return build_summary(plan, run_dir, time.perf_counter() - t0, host_metrics)


def _inprocess(plan: Plan) -> None:
    """Run a 1-GMI plan in this process (tests, debugging): same code path minus the process boundary.

    What the GMI prints (rl-games' own lines) goes to stderr, as a worker's goes to its log: stdout is the
    program's output (the one-line summary).
    """
    from gmiexp.launch.gmi_env import apply_gmi_environment
    from gmiexp.launch.worker import run_gmi

    apply_gmi_environment(plan.gmis[0])
    with contextlib.redirect_stdout(sys.stderr):
        run_gmi(plan, 0)
