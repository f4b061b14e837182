"""The gmiexp_pack Launcher: Hydra hands it a sweep's members; it runs them packed onto shared GPUs.

Hydra's side only: compose each member's config (so a typo stops the sweep before anything starts),
find its run dir as the basic launcher would, and return a JobReturn per member. Slots, the queue,
``auto``, the table and stopping live in :mod:`gmiexp.pack`, imported when a sweep launches (Hydra
imports this module on every start, packed or not).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)


class PackLauncher(Launcher):
    """Runs every member as its own ``python -m gmiexp`` process on a slot; the rest wait in a queue."""

    def __init__(self, **params: Any) -> None:
        self.params = params
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context = config, hydra_context  # members run the CLI, not task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from gmiexp.app import check_members
        from gmiexp.errors import REFUSAL_PREFIX, GmiexpError
        from gmiexp.launch.ownership import discard_refused_sweep
        from gmiexp.pack import launch as pack

        setup_globals()
        assert self.config is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        configs = [self.member_config(list(o), initial_job_idx + i) for i, o in enumerate(job_overrides)]
        try:
            check_members(configs, initial_job_idx, "nothing was launched")  # each config, as its job would
            sweep = pack.PackedSweep(
                params=self.params, sweep_dir=Path(str(self.config.hydra.sweep.dir)),
                overrides=[list(filter_overrides(o)) for o in job_overrides],
                run_dirs=[self.run_dir(c) for c in configs], configs=configs, prefix=self.cli_prefix(),
                compose=lambda o: self.hydra_context.config_loader.load_sweep_config(self.config, o),
                first=initial_job_idx)
            sweep.check()
            if sweep.planning:  # mode=plan: where each member would run and the space they need; nothing runs
                print(sweep.describe(), file=sys.stderr, flush=True)
                discard_refused_sweep(Path(str(self.config.hydra.sweep.dir)), f"{self.config.hydra.job.name}.log")
                sys.exit(0)
        except GmiexpError as e:
            print(f"{REFUSAL_PREFIX}{e}", file=sys.stderr, flush=True)
            if e.exit_code == 2:  # type: ignore[attr-defined]  # refused before any member ran: no sweep dir
                discard_refused_sweep(Path(str(self.config.hydra.sweep.dir)), f"{self.config.hydra.job.name}.log")
            sys.exit(e.exit_code)  # type: ignore[attr-defined]
        code = sweep.run()
        if code:
            sys.exit(code)  # 2 (auto could not profile) or 130 (interrupted): stop the sweep
        return [JobReturn(overrides=list(o), cfg=c, hydra_cfg=self.config, working_dir=str(self.run_dir(c)),
                          task_name=self.config.hydra.job.name, status=JobStatus.COMPLETED)
                for o, c in zip(job_overrides, configs, strict=True)]

    def member_config(self, overrides: list[str], num: int) -> DictConfig:
        """The member's composed config, numbered as the basic launcher numbers it."""
        assert self.hydra_context is not None and self.config is not None
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
        with open_dict(cfg):
            cfg.hydra.job.id = num
            cfg.hydra.job.num = num
        return cfg

    @staticmethod
    def run_dir(cfg: DictConfig) -> Path:
        return Path(str(OmegaConf.select(cfg, "hydra.sweep.dir"))) / str(OmegaConf.select(cfg, "hydra.sweep.subdir"))

    def cli_prefix(self) -> list[str]:
        """``--config-dir``/``--config-name`` the sweep was started with, so members compose the same config."""
        assert self.config is not None
        out = []
        for src in self.config.hydra.runtime.config_sources:
            if src.provider == "command-line" and src.schema == "file":
                out += ["--config-dir", str(src.path)]
        if self.config.hydra.job.config_name not in (None, "config"):
            out += ["--config-name", str(self.config.hydra.job.config_name)]
        return out
