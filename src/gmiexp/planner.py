"""Config -> Plan: hardware, layout template, reduction choice, backend realisation, validation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gmiexp import backends, layouts
from gmiexp.backends.base import Backend
from gmiexp.comm import reduction as reductions
from gmiexp.config import MODES, Config
from gmiexp.device import check_device, check_device_role
from gmiexp.envs import check_task
from gmiexp.errors import ConfigError, invalid
from gmiexp.hardware import Hardware, resolve
from gmiexp.layouts.base import LayoutRequest
from gmiexp.plan import Plan
from gmiexp.role import check_role

LR_SCHEDULES = ("adaptive", "linear", "identity")


def check_config(cfg: Config) -> None:
    """Value checks Hydra's types cannot express."""
    if cfg.mode not in MODES:
        raise invalid("mode", cfg.mode, MODES)
    if cfg.max_iterations < 1:
        raise invalid("max_iterations", cfg.max_iterations, "an integer >= 1")
    if cfg.train.lr_schedule not in LR_SCHEDULES:
        raise invalid("train.lr_schedule", cfg.train.lr_schedule, LR_SCHEDULES)
    if cfg.train.horizon_length < 1 or cfg.train.mini_epochs < 1 or cfg.train.minibatch_size < 1:
        raise ConfigError("train.horizon_length, train.mini_epochs and train.minibatch_size must be >= 1")
    if cfg.logger.name not in ("none", "wandb"):
        raise invalid("logger", cfg.logger.name, ("none", "wandb"))
    if cfg.logger.mode not in ("offline", "online", "disabled"):
        raise invalid("logger.mode", cfg.logger.mode, ("offline", "online", "disabled"))
    if cfg.checkpoint and not Path(cfg.checkpoint).is_file():
        raise invalid("checkpoint", cfg.checkpoint, "an existing rl-games .pth file")


def host(cfg: Config) -> Hardware:
    hw = resolve(cfg.hardware.name)
    if cfg.hardware.cpu_cores is not None:
        if cfg.hardware.cpu_cores < 1:
            raise invalid("hardware.cpu_cores", cfg.hardware.cpu_cores, "an integer >= 1")
        hw.cpu_count = cfg.hardware.cpu_cores
    return hw


def build_plan(cfg: Config, run_dir: Path, hardware: Hardware | None = None) -> tuple[Plan, Backend]:
    """Everything a launch needs, validated; raises ConfigError (exit 2) before anything starts."""
    check_config(cfg)
    hw = hardware or host(cfg)
    check_device(cfg.train.device, hw)
    req = LayoutRequest(layout=cfg.layout, hardware=hw, num_gpus=cfg.num_gpus,
                        gmis_per_gpu=cfg.gmis_per_gpu, num_envs=cfg.num_envs, mode=cfg.mode)
    plan = layouts.get(cfg.layout.name)(req)
    check_task(dataclasses.asdict(cfg.task))
    check_role(layouts.choose_role(cfg.layout.name, cfg.role))
    plan.task = dataclasses.asdict(cfg.task)
    plan.train = dataclasses.asdict(cfg.train)
    plan.logger = dataclasses.asdict(cfg.logger)
    plan.launch = dataclasses.asdict(cfg.launch)
    plan.hardware = hw.summary()
    plan.seed, plan.max_iterations = cfg.seed, cfg.max_iterations
    layouts.configure(plan, cfg)  # role by layout (when role=ppo), channel/async notes, cost model
    check_device_role(cfg.train.device, plan.role, plan.world_size)
    plan.checkpoint = str(Path(cfg.checkpoint).resolve()) if cfg.checkpoint else ""
    plan.experiment, plan.run_dir = cfg.experiment, str(run_dir.resolve())
    plan.reduction, plan.reduction_reason = reductions.resolve(layouts.reduction_for(plan, cfg.reduction.name), plan)
    if not plan.trainer_group:
        plan.reduction_reason = f"no trainer GMIs (layout={plan.layout}): nothing is reduced"
    backend = backends.get(cfg.backend, hw)
    backend.realise(plan, run_dir.resolve())
    return plan.validate(), backend
