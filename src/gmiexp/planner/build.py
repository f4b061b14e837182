"""Config -> Plan: hardware, layout template, reduction choice, backend realisation, validation.

The planner reads only the config, layouts, backends and hardware; what a launch finds on disk (a
previous attempt's checkpoints, ``launch.requeue.resume``) is applied by the caller afterwards.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from gmiexp import backends, layouts
from gmiexp.backends.backend import Backend
from gmiexp.comm import reduction as reductions
from gmiexp.config import Config
from gmiexp.config.checks import validate
from gmiexp.config.support import refusal_message, refused, refused_policy
from gmiexp.costmodel.templates import cost_model, terms_for
from gmiexp.device import check_device, check_device_task
from gmiexp.envs import check_task
from gmiexp.errors import ConfigError, invalid
from gmiexp.hardware import Hardware, resolve, with_mig
from gmiexp.layouts.experience import ExperienceLayout
from gmiexp.layouts.layout import LayoutKind, LayoutRequest
from gmiexp.plan import Plan
from gmiexp.plan.minibatch import minibatch_warning
from gmiexp.planner.footprint import check_footprint
from gmiexp.planner.nodes import replicate, resolve_nodes
from gmiexp.planner.partition import apply, fits, global_batch, per_gmi, refusal
from gmiexp.planner.resources import check_resources, policy_sizes
from gmiexp.planner.seeds import assign_seeds
from gmiexp.rl.rslrl.config import ROLE as RSLRL
from gmiexp.rl.rslrl.config import check_config as check_rslrl_config
from gmiexp.rl.rslrl.config import check_partition as check_rslrl_partition
from gmiexp.role import PPO_ROLES, check_role

if TYPE_CHECKING:
    from collections.abc import Callable

    from gmiexp.plan.model import GlobalBatch
    from gmiexp.planner.partition import Partition

    #: ``replan(plan, partition)``: ``partition`` of a running ``plan``'s global batch, planned and realised
    Replan = Callable[[Plan, Partition], tuple[Plan, Backend]]


def check_rlgames_only(cfg: Config, trainers: int | None = None) -> None:
    """Settings an experience layout's trainer would not apply (all at once, each with its reason).

    ``trainers``: the plan's trainer GMIs (tdg_ex with one and no replay trains with rl-games' own agent);
    None before the layout is built (policy kinds only). Also the policy kinds (CNN, RNN) a layout cannot run
    (``gmiexp.config.support.refused_policy``).
    """
    layout = layouts.get(cfg.layout.name)
    experience = layout.experience
    why = refused_policy(cfg.layout.name, experience, cfg.task, cfg.train, cfg.async_train.replay_ratio)
    if why:
        raise ConfigError(why)
    if not experience or trainers is None:
        return
    rlgames_agent = (layout.kind == LayoutKind.SYNC and trainers == 1 and cfg.async_train.replay_ratio == 0
                     and not cfg.task.central_value)  # as gmiexp.rl.experience.fed_update.applies
    keys = refused(cfg.train, rlgames_agent)  # gmiexp.config.support: what the trainer does not apply, and why
    if keys:
        raise ConfigError(refusal_message(cfg.layout.name, keys))


def check_config(cfg: Config) -> None:
    """Everything the plan refuses that needs neither the node nor its hardware (exit 2).

    Every field in its declared range (``@ranges`` in gmiexp.config.schema), then the cross-field rules, a
    registered role's name, ``launch.reshape`` and train=rslrl's layout and keys. A launcher that runs jobs
    elsewhere (``gmiexp_slurm``) makes these checks for every member before it submits any
    (:func:`gmiexp.app.check_job`); a ``module:Class`` role is imported where the job runs.
    """
    validate(cfg)
    check_rlgames_only(cfg)
    if cfg.train.info_key and (cfg.role not in PPO_ROLES or cfg.layout.name != "tcg_ex"):
        raise ConfigError(f"invalid train.info_key={cfg.train.info_key} with role={cfg.role} layout={cfg.layout.name}:"
                          " only PPO GMIs record an info key (rl-games' role=ppo or train=rslrl, layout=tcg_ex); "
                          "valid here: empty")
    role = layouts.choose_role(cfg.layout.name, cfg.role)
    if ":" not in role:
        check_role(role)
    check_reshape(cfg)
    if role == RSLRL:
        check_rslrl_config(cfg.layout.name, cfg.train.file, cfg.train.rslrl)


def host(cfg: Config) -> Hardware:
    """The process's hardware as the config's ``hardware.*`` fields give it (``hardware.cpus``: its cores now)."""
    if cfg.hardware.cpus is not None:
        narrow_cpus(cfg.hardware.cpus)
    return fitted(cfg, resolve(cfg.hardware.name))


def fitted(cfg: Config, hw: Hardware) -> Hardware:
    """``hw`` as the config's ``hardware.*`` fields narrow it: cores counted, MIG on or off, the instances kept.

    A process's own hardware (:func:`host`), or one a launcher found for its members (a pack slot's or a
    population's ``hardware.mig_instances``), so a member is planned before it starts on what it will see.
    """
    if cfg.hardware.cpu_cores is not None:
        if cfg.hardware.cpu_cores < 1:
            raise invalid("hardware.cpu_cores", cfg.hardware.cpu_cores, "an integer >= 1")
        hw.cpu_count = cfg.hardware.cpu_cores
    if cfg.hardware.mig is not None:
        with_mig(hw, cfg.hardware.mig)
    if cfg.hardware.network_gbps is not None:
        hw.network_gbps = float(cfg.hardware.network_gbps)
    if cfg.hardware.mig_instances is not None:
        keep = set(cfg.hardware.mig_instances)
        known = [d.uuid for g in hw.gpus for d in g.mig_devices]
        for uuid in keep - set(known):
            raise invalid("hardware.mig_instances entry", uuid, known or "none: this host has no MIG instances")
        for g in hw.gpus:
            g.mig_devices = [d for d in g.mig_devices if d.uuid in keep]
    return hw


STARTING_CPUS = sorted(os.sched_getaffinity(0))  # before any hardware.cpus: a re-shape may widen back to them


def check_cpus(cpus: list[int]) -> None:
    """``hardware.cpus`` is any non-empty subset of the cores the process started with (exit 2 otherwise)."""
    if not cpus or not set(cpus) <= set(STARTING_CPUS):
        raise invalid("hardware.cpus", list(cpus), f"a non-empty subset of this process's cores {STARTING_CPUS}")


def narrow_cpus(cpus: list[int]) -> None:
    """``hardware.cpus``: this process (and so its elastic agent and GMIs) runs on these cores only.

    Any subset of the cores the process started with: a re-shaping packed member grows into a finished
    member's cores.
    """
    check_cpus(cpus)
    os.sched_setaffinity(0, set(cpus))


def place_devices(plan: Plan, gpus: list[int] | None, hw: Hardware) -> None:
    """``hardware.gpus``: move the layout's devices 0..n-1 onto the listed GPUs (a packed member's GPU).

    Unset, onto the host's first GPUs: those ``CUDA_VISIBLE_DEVICES`` left it (:func:`gmiexp.hardware.visible`),
    whose indices need not start at 0.
    """
    if gpus is None:
        indices = [g.index for g in hw.gpus]
        if indices == list(range(len(indices))):
            return
        gpus = indices
    used = sorted({g.device for g in plan.gmis})
    valid = [g.index for g in hw.gpus] if hw.has_gpu else "logical GPU indices >= 0"
    if len(gpus) < len(used) or len(set(gpus)) != len(gpus):
        raise invalid("hardware.gpus", list(gpus), f"{len(used)} distinct GPU indices (num_gpus) from {valid}")
    for d in gpus:
        if (hw.has_gpu and d not in valid) or d < 0:
            raise invalid("hardware.gpus entry", d, valid)
    for g in plan.gmis:
        g.device = gpus[used.index(g.device)]


def cap_torch_threads(plan: Plan, cap: int | None) -> None:
    """``train.torch_threads`` (rl-games' params.torch_threads): at most that many per GMI, within its budget."""
    if cap is not None:
        for g in plan.gmis:
            g.torch_threads = min(g.torch_threads, cap)


def warn_minibatch(plan: Plan) -> None:
    """Say (stderr) when train.minibatch_size is fitted to a GMI's batch: never a silent change."""
    msg = minibatch_warning(plan)
    if msg:
        logging.getLogger("gmiexp").warning(msg)


def check_reshape(cfg: Config) -> None:
    """``launch.reshape``: one node, a training layout, a launched (not in-process) run (exit 2 otherwise)."""
    if cfg.launch.reshape == "off":
        return
    training = [n for n in layouts.LAYOUTS.names() if layouts.get(n).kind != LayoutKind.SERVING]
    if layouts.get(cfg.layout.name).kind == LayoutKind.SERVING:
        raise ConfigError(f"invalid launch.reshape={cfg.launch.reshape} with layout={cfg.layout.name}: a serving "
                          f"layout does not train in epochs to re-shape between; valid layouts: {', '.join(training)}")
    if int(cfg.launch.nnodes) > 1:
        raise ConfigError(f"invalid launch.reshape={cfg.launch.reshape} with launch.nnodes={cfg.launch.nnodes}: "
                          "re-shaping stops, re-plans and restarts one node's GMIs; several nodes would have to do it "
                          "in lock-step through a new rendezvous, which gmiexp does not do; valid: launch.reshape=off, "
                          "or launch.nnodes=1")
    if cfg.launch.inprocess:
        raise ConfigError(f"invalid launch.reshape={cfg.launch.reshape} with launch.inprocess=true: a re-shape "
                          "relaunches the GMIs as processes; valid: launch.inprocess=false")


def share_global_batch(plan: Plan, cfg: Config, hw: Hardware) -> None:
    """``batch.total_envs`` (or a run that may re-shape): per-GMI envs and minibatch from the global batch.

    Every partition ``gmis_per_gpu`` 1.. is cut as the layout would and given its part of the batch
    (:func:`gmiexp.planner.partition.per_gmi`); those that can share it are ``plan.global_batch.reachable``, and the
    plan's own GMIs get theirs (or ConfigError naming the reachable ones).
    """
    batch = global_batch(cfg.batch.total_envs, cfg.batch.total_minibatch, plan, fixed=cfg.launch.reshape != "off")
    if batch is None:
        return
    envs: dict[int, int] = {}  # each reachable partition's num_envs per simulator GMI
    for n in range(1, max(int(cfg.launch.reshape_max_gmis_per_gpu), cfg.gmis_per_gpu) + 1):
        try:
            other = layouts.get(cfg.layout.name).build(LayoutRequest(
                layout=cfg.layout, hardware=hw, num_gpus=cfg.num_gpus, gmis_per_gpu=n, num_envs=1))
        except ConfigError:  # a layout that cannot cut n GMIs per GPU (tdg_ex: fewer agents than its trainers)
            continue
        other.train = plan.train
        share = per_gmi(other, batch)
        if share is not None:
            envs[n] = share.num_envs
    reachable = list(envs)
    mine = per_gmi(plan, batch)
    if mine is None:
        raise refusal(plan, batch, reachable)
    batch = dataclasses.replace(batch, reachable=reachable, gmis_per_gpu=cfg.gmis_per_gpu,
                                envs_per_gmi=list(envs.values()))
    plan.notes["partitions"] = (f"global batch {batch.total_envs} environments, minibatch {batch.total_minibatch}: "
                                f"reachable gmis_per_gpu {reachable}")
    splits = trainer_splits(cfg, hw, batch)
    if splits is not None:  # an experience layout: its agent:trainer split is a partition knob too
        batch = dataclasses.replace(batch, trainers_per_gpu=cfg.layout.trainers_per_gpu, trainer_splits=splits)
        plan.notes["partitions"] += f"; at gmis_per_gpu={cfg.gmis_per_gpu}, reachable layout.trainers_per_gpu {splits}"
    apply(plan, mine, batch)


def trainer_splits(cfg: Config, hw: Hardware, batch: GlobalBatch) -> list[int] | None:
    """The ``layout.trainers_per_gpu`` values whose trainers can share ``batch`` at this ``gmis_per_gpu``.

    None for a layout without dedicated trainer GMIs (tcg_ex: every GMI trains).
    """
    layout = layouts.get(cfg.layout.name)
    if not isinstance(layout, ExperienceLayout):
        return None
    out = []
    for t in range(1, max(int(cfg.launch.reshape_max_gmis_per_gpu), cfg.layout.trainers_per_gpu) + 1):
        try:
            other = layout.build(LayoutRequest(layout=dataclasses.replace(cfg.layout, trainers_per_gpu=t), hardware=hw,
                                               num_gpus=cfg.num_gpus, gmis_per_gpu=cfg.gmis_per_gpu, num_envs=1))
        except ConfigError:  # more trainers than the layout allows here
            continue
        other.train = cfg.train
        if fits(other, batch, int(cfg.train.horizon_length)) is None:
            out.append(t)
    return out


def layout_cost(plan: Plan) -> dict:
    """The paper's layout cost model (Tables 3-5) for ``plan``, with the size of the policy its trainer builds."""
    try:
        params: int | None = policy_sizes(plan)[0]
    except Exception:  # noqa: BLE001 - an unknown task id (checked elsewhere): the paper-scale sizes
        params = None
    return cost_model(layouts.paper_families(layouts.get(plan.layout).kind), terms_for(plan, params))


def build_plan(cfg: Config, run_dir: Path, hardware: Hardware | None = None) -> tuple[Plan, Backend]:
    """Everything a launch needs, validated; raises ConfigError (exit 2) before anything starts."""
    check_config(cfg)
    resolve_nodes(cfg.launch)  # node_rank from the scheduler, rendezvous fields checked (exit 2)
    if hardware is None:
        hw = host(cfg)
    else:  # a launcher's member: its cores are checked, not taken (they are the member's process's)
        if cfg.hardware.cpus is not None:
            check_cpus(cfg.hardware.cpus)
        hw = fitted(cfg, hardware)
    check_device(cfg.train.device, hw)
    req = LayoutRequest(layout=cfg.layout, hardware=hw, num_gpus=cfg.num_gpus,
                        gmis_per_gpu=cfg.gmis_per_gpu, num_envs=cfg.num_envs)
    plan = layouts.get(cfg.layout.name).build(req)
    check_rlgames_only(cfg, len(plan.trainer_group))
    check_task(cfg.task)
    check_device_task(cfg.train.device, bool(cfg.task.rnn))
    check_role(layouts.choose_role(cfg.layout.name, cfg.role))
    plan.task, plan.train = copy.deepcopy(cfg.task), copy.deepcopy(cfg.train)  # the Plan owns its sections
    plan.logger = copy.deepcopy(cfg.logger)
    plan.hardware = hw.summary()
    plan.seed, plan.max_iterations = cfg.seed, cfg.max_iterations
    share_global_batch(plan, cfg, hw)
    rslrl = layouts.choose_role(cfg.layout.name, cfg.role) == RSLRL
    if rslrl:
        check_rslrl_partition(cfg.train.file, cfg.train.rslrl, plan.gmis[0].num_envs, len(plan.gmis),
                              cfg.task.simulator)
    if cfg.capture_video and cfg.mode == "train":  # filmed by GMI 0's rl-games agent (gmiexp.rl.rlgames.filming)
        plan.video = {"every": int(cfg.capture_video_freq), "steps": int(cfg.eval.video_steps),
                      "width": int(cfg.eval.video_width), "height": int(cfg.eval.video_height)}
    layouts.configure(plan, cfg)  # role by layout (when role=ppo), the layout's own settings
    plan.notes["cost_model"] = layout_cost(plan)
    plan.checkpoint = str(Path(cfg.checkpoint).resolve()) if cfg.checkpoint else ""
    plan.experiment, plan.run_dir = cfg.experiment, str(run_dir.resolve())
    place_devices(plan, cfg.hardware.gpus, hw)
    backend = backends.get(cfg.backend, hw)
    backend.realise(plan, run_dir.resolve())  # first: which reductions can run depends on the backend (MIG)
    cap_torch_threads(plan, cfg.train.torch_threads)
    if not layouts.get(cfg.layout.name).experience and not rslrl:  # rl-games' agent fits its minibatch per GMI
        warn_minibatch(plan)
    check_footprint(plan, hw)  # one node's GMIs on one node's devices
    plan.launch = copy.deepcopy(cfg.launch)  # from here on the Plan knows its nodes
    replicate(plan)  # every node's GMIs, numbered node-major (launch.nnodes > 1)
    assign_seeds(plan)
    plan.reduction, plan.reduction_reason = reductions.resolve(layouts.reduction_for(plan, cfg.reduction.name), plan)
    if not plan.trainer_group:
        plan.reduction_reason = f"no trainer GMIs (layout={plan.layout}): nothing is reduced"
    return plan.validate(), backend


def replanner(cfg: Config, run_dir: Path) -> Replan:
    """How a re-shaping run (``launch.reshape``) plans its next partition: ``replan(plan, partition)``.

    The app hands it to the launcher (``gmiexp.launch.segments``), which holds the running Plan and asks for a
    :class:`~gmiexp.planner.partition.Partition` of it; the config the run started from stays here. The new plan
    is that config at the partition's GMIs per GPU and slice (what the partition leaves None stays as the run
    started), with ``plan``'s global batch pinned, planned and realised by :func:`build_plan` in ``run_dir``
    (ConfigError when this host cannot realise it or hold its shared memory and files). What a launch finds on
    disk (the checkpoint to resume from) is the caller's, as for the first plan.
    """
    def replan(plan: Plan, partition: Partition) -> tuple[Plan, Backend]:
        if plan.global_batch is None:
            raise ConfigError("invalid re-shape of a plan without a global batch; valid: launch.reshape=request "
                              "or auto, which fixes the starting batch")
        c = copy.deepcopy(cfg)
        c.gmis_per_gpu = int(partition.gmis_per_gpu)
        c.batch.total_envs, c.batch.total_minibatch = plan.global_batch.total_envs, plan.global_batch.total_minibatch
        if partition.trainers_per_gpu is not None:
            c.layout.trainers_per_gpu = partition.trainers_per_gpu
        if partition.cpus is not None:
            c.hardware.cpus = partition.cpus
        if partition.sm_percent is not None:
            c.backend.sm_percent = partition.sm_percent  # the MPS backends' field (set as a request sets it)
        new, backend = build_plan(c, run_dir)
        check_resources(new, run_dir)  # more GMIs, more rings: a partition /dev/shm cannot hold rolls back
        return new, backend

    return replan
