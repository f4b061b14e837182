"""Run a Plan: backend session around torch.distributed.elastic, one process per GMI of this node.

elastic (the engine behind torchrun) spawns the workers, gives them ranks and
a rendezvous (on 127.0.0.1 for one node; at node 0's ``launch.rdzv_endpoint``
for several, one agent per node), captures their logs and stops them all when
one fails. gmiexp adds the backend's set-up/tear-down, heartbeats (a hung GMI
is killed, which elastic then treats as a failure), the progress bar and the
summary; across nodes, the launchers watch each other through node 0's store
(:mod:`gmiexp.launch.coordinator`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

from gmiexp import status
from gmiexp.backends.backend import Backend
from gmiexp.config import LaunchConfig as LaunchSection
from gmiexp.errors import ConfigError, Interrupted, LaunchError, RefusedInGmi
from gmiexp.launch import lifeline, warm
from gmiexp.launch.affinity import move_cores
from gmiexp.launch.coordinator import Coordinator
from gmiexp.launch.elastic import STOP_TEXT, Reshaped
from gmiexp.launch.failure import Failure, log_tail, process_failures, run_error, where
from gmiexp.launch.gmi_env import gmi_environment
from gmiexp.launch.live import RunRows
from gmiexp.launch.monitor import Monitor
from gmiexp.launch.summary import build_summary, merge_nodes
from gmiexp.launch.watchdog import Watchdog
from gmiexp.launch.worker import run_gmi
from gmiexp.plan import Plan
from gmiexp.planner.build import STARTING_CPUS
from gmiexp.planner.nodes import resolve_nodes
from gmiexp.shm.cleanup import cleanup_run, sweep_dead_runs
from gmiexp.shm.names import launcher_tag
from gmiexp.signals import ELASTIC_SIGNALS, LauncherStop

STOP_FILE = "stop_requested"  # in the node's run dir: written at the first Ctrl-C/SIGTERM, read by the GMIs


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def frames_per_iteration(plan: Plan) -> int:
    return plan.total_envs() * int(plan.train.horizon_length)


def node_run_dir(launch_cfg: LaunchSection, run_dir: Path) -> Path:
    """Where this node's files go: ``run_dir`` for one node, ``run_dir/node<R>`` with several.

    Nodes may share ``run_dir`` (the tasks of one Slurm job do). Resolves the node's rank (ConfigError, exit 2).
    """
    resolve_nodes(launch_cfg)
    return run_dir if int(launch_cfg.nnodes) == 1 else run_dir / f"node{launch_cfg.node_rank}"


class _ChildFailureTraceback(logging.Filter):
    """Elastic's own traceback of a failed GMI: the launcher names the root cause with its log tail instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("failed (exitcode")


QUIET_FAILURES = _ChildFailureTraceback()


def _elastic(plan: Plan, run_dir: Path, plan_path: Path, graceful: bool = False) -> None:
    """``graceful``: SIGINT/SIGTERM are the launcher's (:class:`gmiexp.signals.LauncherStop`), not elastic's."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    entry, args, start_method = warm.entrypoint(plan, str(plan_path))
    logging.getLogger("torch.distributed.elastic.multiprocessing.api").addFilter(QUIET_FAILURES)  # once
    lc = plan.launch
    if plan.nnodes > 1:  # node 0's launcher already serves the store on the endpoint: every agent is its client
        rdzv = dict(run_id=str(lc.rdzv_id), rdzv_endpoint=str(lc.rdzv_endpoint), local_addr=lc.local_addr,
                    rdzv_configs={"is_host": False, "join_timeout": int(float(lc.rdzv_timeout_s))})
    else:
        port = int(lc.master_port or 0) or free_port()
        rdzv = dict(run_id=f"gmiexp-{uuid.uuid4().hex[:8]}", rdzv_endpoint=f"127.0.0.1:{port}", local_addr="127.0.0.1")
    config = LaunchConfig(
        min_nodes=plan.nnodes,
        max_nodes=plan.nnodes,
        nproc_per_node=len(plan.local_gmis),
        rdzv_backend="c10d",
        max_restarts=0,
        monitor_interval=float(lc.monitor_interval_s),
        start_method=start_method,
        logs_specs=DefaultLogsSpecs(log_dir=str(run_dir / "logs"), redirects=Std.ALL, tee=Std.NONE),
        shutdown_timeout=5,
        **({"signals_to_handle": ELASTIC_SIGNALS} if graceful else {}),
        **rdzv,
    )
    elastic_launch(config, entry)(*args)


def kill_local_gmis(killed: set[int]) -> None:
    """SIGKILL this launcher's running GMI workers, adding their pids to ``killed`` (elastic then stops).

    A GMI that already died on its own (a zombie until elastic reaps it) is left out: its failure may be the root.
    """
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "gmiexp.launch.worker" in " ".join(p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE:
                killed.add(p.pid)
                p.kill()


def stop_abrupt_gmis(run_dir: Path, gmis: list[int]) -> None:
    """SIGTERM the running GMIs whose role does not stop gracefully (a user's role): they cannot keep anything."""
    for g in gmis:
        s = status.read_status(run_dir, g) or {}
        if s.get("pid") and s.get("stage") not in ("done",) and s.get("graceful") is False:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(s["pid"]), signal.SIGTERM)


def _describe_failure(err: Exception, plan: Plan, run_dir: Path, watchdog: Watchdog,
                      coord: Coordinator | None, killed: set[int]) -> LaunchError | RefusedInGmi:
    node, nnodes = plan.node_rank, plan.nnodes
    local_rank = {g.id: i for i, g in enumerate(plan.local_gmis)}
    failures: list[Failure] = []
    if watchdog.hang is not None:
        h = watchdog.hang
        failures.append(Failure(
            node=node, gmi=h.gmi, secondary=False, time=time.time(), tail=log_tail(run_dir, local_rank[h.gmi]),
            head=(f"{h.describe(lambda g: where(g, node, nnodes))} "
                  f"(limit launch.heartbeat_timeout_s={watchdog.heartbeat_timeout_s:g})")))
    failures += process_failures(err, {i: g for g, i in local_rank.items()}, node, nnodes, run_dir,
                                 killed=watchdog.hang is not None or killed)
    fallback = f"launch failed: {err}"
    return coord.error(failures, fallback) if coord is not None else run_error(failures, nnodes, fallback=fallback)


def launch(plan: Plan, backend: Backend, run_dir: Path, live: Any = None, reshaper: Any = None) -> dict[str, Any]:
    """Execute this node's part of ``plan``; return the summary (also written to ``summary.json``).

    ``run_dir`` is the node's directory (:func:`node_run_dir`); node 0 of several returns the run's summary, merged
    from every node's and written to the parent directory. ``live``: a :class:`gmiexp.launch.live.LiveLog` the
    watchdog feeds while the run trains. Raises LaunchError, or Interrupted (Ctrl-C/SIGTERM) carrying the
    summary of what was trained (``status: interrupted``). ``reshaper``: a :class:`gmiexp.launch.elastic.Reshaper`
    polled while the GMIs train; when it decides, the GMIs end their epoch and
    :class:`gmiexp.launch.elastic.Reshaped` is raised carrying this segment's summary.
    """
    if plan.launch.inprocess and plan.world_size != 1:
        raise ConfigError(f"invalid launch.inprocess=true with {plan.world_size} GMIs; valid: a 1-GMI plan")
    run_dir.mkdir(parents=True, exist_ok=True)
    status.reset(run_dir)
    lc = plan.launch
    local = [g.id for g in plan.local_gmis]  # ids are global; this launcher watches its node's GMIs
    watchdog = Watchdog(
        run_dir=str(run_dir), gmis=local,
        total_frames=frames_per_iteration(plan) * plan.max_iterations,
        heartbeat_timeout_s=float(lc.heartbeat_timeout_s),
        interval_s=float(lc.monitor_interval_s), progress=bool(lc.progress) and plan.node_rank == 0,
        progress_interval_s=float(lc.progress_interval_s), live=live,
    )
    monitor = Monitor(backend.hardware, interval_s=max(0.5, float(lc.monitor_interval_s)),
                      gmi_devices={g.id: g.device for g in plan.local_gmis},
                      pids=lambda: status.gmi_pids(run_dir, local))
    # shared-memory segments of this run are named /dev/shm/gmiexp_<tag>_*; workers inherit the tag,
    # and the launcher's identity, so they die with it (launch/lifeline.py)
    swept = sweep_dead_runs()
    if swept:
        print(f"gmiexp: removed {len(swept)} shared-memory segment(s) of killed runs", file=sys.stderr)
    previous = {k: os.environ.get(k) for k in ("GMIEXP_RUN_TAG", lifeline.ENV)}
    tag = os.environ["GMIEXP_RUN_TAG"] = launcher_tag()
    os.environ[lifeline.ENV] = lifeline.identity()
    t0 = time.perf_counter()
    from torch.distributed.elastic.multiprocessing.api import SignalException

    try:
        with backend.session(plan, run_dir):
            return _run_session(plan, run_dir, watchdog, monitor, t0, live, reshaper)
    except SignalException as sig:  # after elastic's run its handlers stay: a signal while nodes gather
        raise Interrupted(f"stopped by signal {sig.sigval.name}") from None
    finally:
        cleanup_run(tag)  # segments a crashed GMI could not unlink
        for k, v in previous.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run_session(plan: Plan, run_dir: Path, watchdog: Watchdog, monitor: Any, t0: float,
                 live: Any = None, reshaper: Any = None) -> dict[str, Any]:
    from torch.distributed.elastic.multiprocessing.api import SignalException

    lc = plan.launch
    plan_path = plan.save(run_dir / "plan.yaml")  # after set-up: MIG creation fills instance UUIDs
    killed: set[int] = set()  # GMIs this launcher killed because another node failed
    reshaping = None  # the re-shape decision the GMIs stopped for
    if plan.nnodes > 1:
        print(f"gmiexp: node {plan.node_rank} of {plan.nnodes}: waiting for every node at "
              f"launch.rdzv_endpoint={lc.rdzv_endpoint} (up to launch.rdzv_timeout_s="
              f"{float(lc.rdzv_timeout_s):g})", file=sys.stderr, flush=True)
    coord = Coordinator(plan, stop_local=lambda: kill_local_gmis(killed)).start() if plan.nnodes > 1 else None
    try:
        if coord is not None:
            coord.agree()  # exit 2 on every node when their plans differ, before any GMI starts
        watchdog.start()
        monitor.start()
        try:
            if lc.inprocess:
                _inprocess(plan)
            else:
                stopping = LauncherStop(run_dir / STOP_FILE, on_first=lambda: stop_abrupt_gmis(
                    run_dir, [g.id for g in plan.local_gmis])) if plan.nnodes == 1 else None
                with stopping.installed() if stopping else contextlib.nullcontext(), \
                        _reshape_watch(reshaper, live, run_dir / STOP_FILE, stopping, lc) as pending:
                    try:
                        _elastic(plan, run_dir, plan_path, graceful=stopping is not None)
                    except Exception:
                        if stopping is None or not stopping.requested:
                            raise
                if stopping is not None and stopping.requested:  # the GMIs ended their epoch and stopped
                    raise _Stopped(signal.Signals(stopping.signum).name)
                if pending and not _ended(plan, live, reshaper, pending[0]):  # they ended the epoch to re-shape
                    reshaping = pending[0]
        except _Stopped as how:
            stopped = f"stopped by {how} (the GMIs ended the epoch)"
        except SignalException as sig:
            _tell_others(coord, plan, f"node {plan.node_rank}'s launcher was stopped by signal {sig.sigval.name}")
            stopped = f"stopped by signal {sig.sigval.name}"
        except KeyboardInterrupt as e:  # a second Ctrl-C (every GMI stopped at once), or Ctrl-C in-process
            _tell_others(coord, plan, f"node {plan.node_rank}'s launcher was interrupted (Ctrl-C)")
            stopped = str(e) or "interrupted (Ctrl-C)"
        except RefusedInGmi:  # launch.inprocess: the GMI's refusal as it is
            raise
        except Exception as err:  # ChildFailedError and friends
            raise _describe_failure(err, plan, run_dir, watchdog, coord, killed) from None
        else:
            stopped = ""
            watchdog.complete = reshaping is None  # a re-shape's segment is not the run's end
        finally:
            watchdog.stop()
            host_metrics = monitor.stop()
        if stopped:  # the GMIs ended their epoch (GMI 0 checkpointed) or were killed: keep what they wrote
            wall = time.perf_counter() - t0
            summary = build_summary(plan, run_dir, wall, host_metrics, rows=_final_rows(live, plan, run_dir, wall),
                                    status="interrupted")
            summary["error"] = f"{stopped}; every GMI was stopped"
            (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
            raise Interrupted(summary["error"], summary=summary)
        if watchdog.hang is not None:
            raise _describe_failure(RuntimeError("hang"), plan, run_dir, watchdog, coord, killed)
        if reshaping is not None:
            wall = time.perf_counter() - t0
            raise Reshaped(reshaping, build_summary(plan, run_dir, wall, host_metrics,
                                                    rows=_final_rows(live, plan, run_dir, wall), status="reshaped"))
        wall = time.perf_counter() - t0
        summary = build_summary(plan, run_dir, wall, host_metrics, rows=_final_rows(live, plan, run_dir, wall))
        if coord is None:
            return summary
        nodes = coord.gather(summary, timeout_s=float(lc.rdzv_timeout_s))
        return merge_nodes(plan, run_dir.parent, nodes, time.perf_counter() - t0) if plan.node_rank == 0 else summary
    finally:
        if coord is not None:
            coord.close()


@contextlib.contextmanager
def _reshape_watch(reshaper: Any, live: Any, stop_file: Path, stopping: LauncherStop | None,
                   lc: LaunchSection) -> Any:
    """Poll ``reshaper`` with this segment's run rows while the GMIs train; a decision writes the stop file."""
    import threading

    pending: list[Any] = []
    if reshaper is None or live is None or stopping is None:
        yield pending
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(max(0.2, float(lc.monitor_interval_s))):
            if stopping.requested:
                return
            d = reshaper.poll(list(live.rows.rows))
            if d is not None and _move_live(reshaper, d):
                continue
            if d is not None:
                pending.append(d)
                stop_file.write_text(STOP_TEXT)  # the GMIs end this epoch, GMI 0 checkpoints, they exit 0
                print(f"\ngmiexp: re-shaping at the next epoch boundary (epoch {d.epoch} done): {d.move()} "
                      f"({d.reason})", file=sys.stderr, flush=True)
                return

    t = threading.Thread(target=watch, name="gmiexp-reshape", daemon=True)
    t.start()
    try:
        yield pending
    finally:
        done.set()
        t.join(timeout=5)


def _move_live(reshaper: Any, d: Any) -> bool:
    """Carry out a re-shape that keeps the GMIs and trades cores for as many others by re-pinning (no restart).

    False when ``d`` is another re-shape, or asks for cores this process may not take (it then restarts onto them,
    and planning refuses them: the re-shape rolls back).
    """
    new, now = d.overrides.get("hardware.cpus"), sorted(os.sched_getaffinity(0))
    if d.to != d.frm or set(d.overrides) != {"hardware.cpus"} or len(new or []) != len(now) \
            or not set(new) <= set(STARTING_CPUS):
        return False
    t0 = time.time()
    threads = move_cores(now, list(new))
    cost = round(time.time() - t0, 3)
    reshaper.done(d, live=True, threads=threads, stop_s=0.0, plan_s=cost, started_at=t0, cost_s=cost)
    print(f"\ngmiexp: moved from cores {now} to {sorted(new)} without a restart ({threads} threads, {d.reason})",
          file=sys.stderr, flush=True)
    return True


def _ended(plan: Plan, live: Any, reshaper: Any, decision: Any) -> bool:
    """True when the run reached max_iterations before the GMIs saw the re-shape (it is then refused)."""
    rows = _live_rows(live) if live is not None else []
    if rows and int(rows[-1].get("iteration", 0)) >= plan.max_iterations:
        reshaper.note({"request": decision.request, "status": "refused", "why": "the run ended first",
                       "epoch": decision.epoch})
        return True
    return False


class _Stopped(Exception):  # noqa: N818 - control flow: the launcher's graceful stop completed
    """The GMIs stopped after the launcher's stop request (its signal's name)."""


def _final_rows(live: Any, plan: Plan, run_dir: Path, wall_s: float) -> list[dict[str, Any]]:
    """Every run row, the iterations only some GMIs reached included; composed from the histories without a live log."""
    if live is None:
        composer = RunRows(plan, run_dir, t0=time.time() - wall_s)
        composer.poll(final=True)
        return composer.rows
    return _live_rows(live)


def _live_rows(live: Any) -> list[dict[str, Any]]:
    """The live log's rows, polled once more."""
    live.poll(final=True)
    return live.all_rows


def _tell_others(coord: Coordinator | None, plan: Plan, what: str) -> None:
    """Post an interrupted launcher as this node's root failure, so the other nodes stop and name it."""
    if coord is not None:
        coord.stop()
        coord.report([Failure(node=plan.node_rank, gmi=-1, head=what, tail="", secondary=False, time=time.time())],
                     wait=False)


def _inprocess(plan: Plan) -> None:
    """Run a 1-GMI plan in this process (tests, debugging): same code path minus the process boundary.

    What the GMI prints (rl-games' own lines) goes to stderr, as a worker's goes to its log: stdout is the
    program's output (the one-line summary).
    """
    try:
        with gmi_environment(plan.gmis[0]), contextlib.redirect_stdout(sys.stderr):
            run_gmi(plan, 0)
    except ConfigError as e:  # as a worker's: bad input only the GMI saw, named as the launcher names a worker's
        raise RefusedInGmi(f"{e} (GMI 0 refused it at start, in the launcher's process)") from None
