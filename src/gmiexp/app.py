"""``run(cfg)``: what ``python -m gmiexp`` does once Hydra has composed the config."""

from __future__ import annotations

import copy
import math
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, open_dict

from gmiexp.comm.reduction.calibrate import calibrate
from gmiexp.config import Config
from gmiexp.config.compose import to_config
from gmiexp.config.enums import Mode
from gmiexp.costmodel.reductions import format_cost, reduction_cost
from gmiexp.errors import ConfigError, GmiexpError, Interrupted, LaunchError, RefusedInGmi, by_member, fs_problem
from gmiexp.launch import lifeline, warm
from gmiexp.launch.elastic import reshaper_for
from gmiexp.launch.launcher import launch, node_run_dir
from gmiexp.launch.live import LiveLog
from gmiexp.launch.ownership import LOCK_NAME, own_run_dir
from gmiexp.launch.summary import one_line, run_config, write_summary
from gmiexp.pbt.members import refuse_unavailable, starting_values
from gmiexp.pbt.placement import check_memory_here, member_config, members_here, memory_here, placement
from gmiexp.pbt.placement import describe as describe_population
from gmiexp.pbt.placement import space as population_space
from gmiexp.planner.build import build_plan, check_config, replanner
from gmiexp.planner.commands import format_commands, node_commands
from gmiexp.planner.resources import MIB, check_resources, disk_need, free_bytes, policy_sizes, shm_need
from gmiexp.rl.rlgames.filming import check as check_video
from gmiexp.rl.rlgames.fit import check_checkpoint_fits
from gmiexp.rl.rslrl.checkpoint import check_checkpoint_fits as check_rslrl_checkpoint_fits
from gmiexp.rl.rslrl.config import ROLE as ROLE_RSLRL
from gmiexp.search import run_search
from gmiexp.signals import sigterm_raises
from gmiexp.tools.doctor import doctor, format_doctor


def run_train(cfg: Config, run_dir: Path) -> dict:
    if cfg.pbt is not None:  # a population: its members are runs of their own (gmiexp.pbt.controller)
        from gmiexp.pbt.controller import run_population

        return run_population(cfg, run_dir, _hydra_overrides())

    node_dir = node_run_dir(cfg.launch, run_dir)  # run_dir itself for one node, else run_dir/node<R>
    created = not node_dir.exists()
    try:
        node_dir.mkdir(parents=True, exist_ok=True)
        # SIGTERM in any phase (planning, waiting for other nodes, gathering) ends like Ctrl-C: exit 130
        with own_run_dir(node_dir), sigterm_raises(_stopped):
            return _train(cfg, run_dir, node_dir)
    except ConfigError:  # refused before anything launched: leave no node directory behind
        if created:
            _remove_untouched(node_dir)
        raise
    except OSError as e:  # the run dir cannot be written before anything started
        if fs_problem(e) is None:
            raise
        raise ConfigError(f"cannot write the run directory: {fs_problem(e)}; valid: a writable run dir with free "
                          "space (hydra.run.dir=...)") from None


def _remove_untouched(node_dir: Path) -> None:
    """Remove a node directory this run created that holds nothing but its lock file."""
    if {p.name for p in node_dir.iterdir()} <= {LOCK_NAME}:
        (node_dir / LOCK_NAME).unlink(missing_ok=True)
        node_dir.rmdir()


def _train(cfg: Config, run_dir: Path, node_dir: Path) -> dict:
    from gmiexp.launch.requeue import resume  # requeue and segments import rl-games (checkpoints): not in mode=plan
    from gmiexp.launch.segments import run_segments

    lifeline.follow()  # a pack launcher's or population's job: it stops as on Ctrl-C if that process is killed
    plan, backend = build_plan(cfg, node_dir)
    if plan.checkpoint:  # the user's: another task's or network's policy is bad input
        fits = check_rslrl_checkpoint_fits if plan.role == ROLE_RSLRL else check_checkpoint_fits
        fits(Path(plan.checkpoint), plan.task)
    resume(plan, node_dir, cfg.launch.resume)  # a requeued run goes on from its own latest checkpoint
    if backend.hardware.is_preset:
        raise ConfigError(f"invalid hardware={cfg.hardware.name} for mode=train: presets only plan (mode=plan); "
                          "valid for running: auto, cpu")
    check_resources(plan, node_dir)
    if plan.node_rank == 0:
        check_video(plan)  # capture_video=True: a layout that films and a task that renders, or exit 2
        print(start_lines(plan, run_dir), file=sys.stderr, flush=True)
    reshaper = reshaper_for(plan, node_dir)  # before the sinks open: a bad launch.reshape_prior exits 2 first
    warm.start(plan)  # the GMIs' server imports torch, the trainer and the simulator while the sinks open
    live = LiveLog.open(plan, node_dir) if plan.node_rank == 0 else None  # node 0 speaks for the run
    summary: dict | None = None
    try:
        try:
            if reshaper is not None and live is not None:  # launch.reshape: partitions change between epochs
                summary = run_segments(plan, backend, node_dir, live, reshaper, replanner(cfg, node_dir))
            else:
                summary = launch(plan, backend, node_dir, live=live)
        except OSError as e:  # the launcher's own writes (status, plan, logs) on a full or read-only disk
            if fs_problem(e) is None:
                raise
            raise LaunchError(f"cannot write the run's files: {fs_problem(e)}") from None
    except Interrupted as e:
        summary = e.summary  # what was trained until the stop (status: interrupted), written by the launcher
        if summary is None:
            summary = _failed(plan, run_dir, node_dir, e, "interrupted")
        else:
            print(one_line(summary), flush=True)
        raise
    except (LaunchError, RefusedInGmi) as e:  # a GMI's refusal: bad input (exit 2), but its processes ran
        e = _explained(e, plan, node_dir)
        summary = _failed(plan, run_dir, node_dir, e, "failed")
        raise e from None
    finally:
        if live is not None:
            live.finish(summary)
    print(one_line(summary), flush=True)
    return summary


def _explained(e: GmiexpError, plan: object, node_dir: Path) -> GmiexpError:
    """``e`` with what the user must know first: a full run directory, the checkpoint a failed resume loaded."""
    if not isinstance(e, LaunchError):
        return e

    head, _, rest = str(e).partition("\n")
    extra = []
    try:
        free = free_bytes(node_dir)
    except OSError:
        free = None
    if free is not None and free < MIB and "no space left" not in head:
        extra.append(f"the run directory {node_dir} is full ({free / MIB:.2f} MiB free)")
    resumed = getattr(plan, "resumed", None)
    if resumed:
        extra.append(f"this attempt resumed from checkpoint {resumed['checkpoint']} (epoch {resumed['epoch']})")
    if not extra:
        return e
    return LaunchError(f"{head}; {'; '.join(extra)}" + (f"\n{rest}" if rest else ""))


def _failed(plan: Any, run_dir: Path, node_dir: Path, e: Exception, status: str) -> dict:
    """The summary of a run that ended without one of its own, written atomically (never left empty)."""
    failed = {"status": status, "error": str(e).splitlines()[0], "run_dir": str(run_dir), "plan_id": plan.plan_id,
              **({"resumed": plan.resumed} if plan.resumed else {})}
    try:
        for d in {node_dir, run_dir} if plan.node_rank == 0 else {node_dir}:  # node 0 speaks for the run
            write_summary(d / "summary.json", failed)
    except OSError as write_err:  # a full disk: the error the user needs is the run's, said once
        if fs_problem(write_err) is None:
            raise
        print(f"gmiexp: could not write the failure summary: {fs_problem(write_err)}", file=sys.stderr)
    return failed


def start_lines(plan: Any, run_dir: Path) -> str:
    """What a run says before it starts: where its files go and a short form of what it runs (full: plan.yaml)."""
    c = run_config(plan)
    short = " ".join(f"{k}={c[k]}" for k in ("task", "layout", "backend", "reduction", "gmis", "num_envs",
                                            "max_iterations", "seed"))
    return (f"gmiexp: run dir {run_dir}\n"
            f"gmiexp: {short} horizon={plan.train.horizon_length} (full config: {run_dir}/.hydra/config.yaml, "
            f"plan: plan.yaml)")


def run_plan(cfg: Config, run_dir: Path, overrides: list[str] | None = None) -> dict:
    """Print the Plan (YAML on stdout; the cost model, the reduction and the per-node commands on stderr).

    ``overrides``: the user's command line for the per-node commands; None = Hydra's, when Hydra runs this.
    Launches nothing. A population prints member 0's plan on its slot (a run of one node, as its process will
    compose it), then every member's node, slot and starting values; on several nodes the nodes' commands too.
    """
    given = _hydra_overrides() if overrides is None else overrides
    plan, _backend = build_plan(cfg, run_dir)
    population_nodes = cfg.pbt is not None and plan.nnodes > 1
    cmds = node_commands(plan, given) if plan.nnodes > 1 else None
    place = placement(cfg, given, planning=True) if cfg.pbt is not None else None
    if place is not None:  # member 0 as its process will run: a run of one node on its slot, with its values
        member = member_config(cfg, given, place.overrides(place.pool[0]), 0, starting_values(cfg)[0])
        plan, _backend = build_plan(member, run_dir, hardware=copy.deepcopy(place.hw))
        alike = [plan] * members_here(cfg)  # this node's members, every one alike
        check_memory_here(alike, place)
    try:
        n_params: int | None = policy_sizes(plan)[0]
    except Exception:  # noqa: BLE001 - a task whose sizes are unknown: Table 7's sizes instead
        n_params = None
    plan.notes["policy_params"] = n_params
    if cfg.reduction.calibrate:

        cost = reduction_cost(plan, params=n_params, bandwidth=calibrate())
    else:
        cost = reduction_cost(plan, params=n_params)
    plan.notes["reduction_cost"] = cost
    if cmds:
        plan.notes["node_commands"] = cmds
    print(plan.to_yaml(), end="", flush=True)
    per_node = len(plan.local_gmis)
    print((f"plan (member 0 on its slot {place.pool[0].name}; each member alike on its own): " if place is not None
           else "plan: ") +
          f"{plan.world_size} GMIs on {plan.nnodes} node{'s' if plan.nnodes > 1 else ''} "
          f"({per_node} per node on {len(plan.devices)} GPU{'s' if len(plan.devices) != 1 else ''}); "
          f"reduction {plan.reduction}: {plan.reduction_reason}", file=sys.stderr, flush=True)
    print(format_cost(cost), file=sys.stderr, flush=True)
    if place is None:
        here, (shm, disk) = "this node", (shm_need(plan), disk_need(plan))
    else:
        here, (shm, disk) = f"this node's {len(alike)} member{'s' if len(alike) != 1 else ''}", population_space(
            cfg, alike)
    print(f"space ({here}, estimated): {shm.format()}; {disk.format()}", file=sys.stderr, flush=True)
    if place is not None:
        print(f"memory (rollout buffers, at least): {memory_here(alike, place)}", file=sys.stderr, flush=True)
    if cmds:
        print(format_commands(cmds, torchrun=not population_nodes), file=sys.stderr, flush=True)
    if place is not None:
        print(describe_population(cfg, place), file=sys.stderr, flush=True)
    return {"status": "ok", "plan_id": plan.plan_id}


def _hydra_overrides() -> list[str]:
    """The command line's overrides when Hydra runs this job (none otherwise: tests call run() directly)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def run_doctor(cfg: Config, run_dir: Path) -> dict:

    report = doctor()
    print(format_doctor(report), flush=True)
    return report


def run_search_mode(cfg: Config, run_dir: Path) -> dict:

    return run_search(cfg, run_dir)


def run_eval_mode(cfg: Config, run_dir: Path) -> dict:
    from gmiexp.eval import run_eval

    return run_eval(cfg, run_dir)


RUNNERS = {Mode.train: run_train, Mode.plan: run_plan, Mode.doctor: run_doctor, Mode.search: run_search_mode,
           Mode.eval: run_eval_mode}


def run(cfg: DictConfig | Config, run_dir: Path) -> int:
    """Run one job; return its exit code (2 bad input, 1 failed run, 130 interrupted)."""
    return run_job(cfg, run_dir)[0]


def check_job(cfg: DictConfig | Config) -> Config:
    """The checks a job makes before it knows its node: the typed config and what its mode refuses (ConfigError).

    A launcher that runs jobs elsewhere (hydra-submitit-launcher: Slurm) makes them for every member before it
    submits any, so bad input exits 2 with nothing queued. A mode that plans the config as given also makes the
    plan's checks that need no node (:func:`gmiexp.planner.build.check_config`).
    """
    c = to_config(cfg)
    refuse_unavailable(c)  # pbt=... with a mode that cannot take a population
    if Mode(c.mode) in (Mode.train, Mode.plan, Mode.search):
        check_config(c)
    return c


def check_members(cfgs: Sequence[DictConfig], first: int, done: str) -> None:
    """:func:`check_job` for every member of a sweep before any starts (``first``: the first member's number).

    One ConfigError names each reason once with the members that hold it (:func:`gmiexp.errors.by_member`).
    """
    reasons: dict[str, list[int]] = {}
    for k, cfg in enumerate(cfgs):
        job = copy.deepcopy(cfg)
        with open_dict(job):
            job.pop("hydra", None)  # as Hydra hands a job its config
        try:
            check_job(job)
        except ConfigError as e:
            for reason in e.reasons:
                reasons.setdefault(reason, []).append(first + k)
    if reasons:
        raise by_member(reasons, done)


def run_job(cfg: DictConfig | Config, run_dir: Path) -> tuple[int, dict | None]:
    """Run one job; return its exit code and what its mode returned (a train run's summary)."""
    try:
        c = check_job(cfg)
        try:
            run_dir.mkdir(parents=True, exist_ok=True)  # c.mode is a Mode: to_config checked it
        except OSError as e:
            if fs_problem(e) is None:
                raise
            raise ConfigError(f"cannot create the run directory: {fs_problem(e)}; valid: a writable place "
                              "(hydra.run.dir=...)") from None
        return 0, RUNNERS[Mode(c.mode)](c, run_dir)
    except GmiexpError as e:
        print(f"gmiexp: error: {e}", file=sys.stderr, flush=True)
        return e.exit_code, None  # type: ignore[attr-defined]
    except KeyboardInterrupt:
        print("gmiexp: interrupted", file=sys.stderr, flush=True)
        return 130, None
    except OSError as e:  # a file system that refused a write (full, quota, read-only): not a bug
        if fs_problem(e) is None:
            traceback.print_exc()
            return 1, None
        print(f"gmiexp: error: {fs_problem(e)}", file=sys.stderr, flush=True)
        return 1, None
    except Exception:  # a bug, not bad input: show it, exit 1
        traceback.print_exc()
        return 1, None


def _stopped(signum: int) -> Interrupted:
    import signal

    return Interrupted(f"stopped by signal {signal.Signals(signum).name}")


def objective(result: dict | None, name: str) -> float | None:
    """The metric ``name`` of a train run's summary (what a sweeper optimises); None for other modes.

    Raises LaunchError when a train run's summary lacks it or it is not a finite number (reward/mean of a run
    too short to finish an episode), so Optuna records a failed trial rather than a made-up value.
    """
    if not result or "metrics" not in result:
        return None
    value = result["metrics"].get(name)
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        have = ", ".join(k for k, v in result["metrics"].items() if isinstance(v, (int, float)))
        raise LaunchError(f"objective={name} is {value!r} in this run's summary; metrics with values: {have}")
    return float(value)
