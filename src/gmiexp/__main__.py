"""``python -m gmiexp [overrides]``: a thin Hydra entry point around :func:`gmiexp.app.run`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from gmiexp import multirun
from gmiexp.app import objective, run_job
from gmiexp.config.cli_keys import check_overrides
from gmiexp.config.compose import conf_dir
from gmiexp.config.registration import register_configs
from gmiexp.errors import ConfigError, LaunchError
from gmiexp.launch.ownership import discard_refused, discard_refused_sweep

register_configs()
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"  # Hydra's own: one job after another


@hydra.main(version_base="1.3", config_path=conf_dir(), config_name="config")
def hydra_main(cfg: DictConfig) -> float | None:
    """One job. In a multirun it returns the run's ``objective`` metric, which sweepers such as Optuna maximise.

    A failed multirun job raises: Hydra records the job as failed, the basic sweeper finishes its batch and then
    stops, and Optuna marks the trial failed (``hydra.sweeper.max_failure_rate`` decides whether the study goes on).
    Bad input (2) and an interrupt (130) stop a sweep run in this process at once. A job in a process of its own
    (hydra-submitit-launcher) raises for bad input too, so its launcher gets a result
    (:class:`gmiexp.multirun.JobFailed`); an interrupted one leaves none (Slurm may requeue it: preemption).
    """
    multirun.state["ran"] = True
    hc = HydraConfig.get()
    out = hc.runtime.output_dir
    code, result = run_job(cfg, Path(out))
    if code == 2 and hc.mode != RunMode.MULTIRUN:  # bad input leaves no run dir behind
        discard_refused(Path(out), f"{hc.job.name}.log")
    elif code == 2 and multirun.in_sweep_process() and hc.launcher._target_ == BASIC_LAUNCHER:  # jobs in turn
        discard_refused_sweep(Path(hc.sweep.dir), f"{hc.job.name}.log")
    if code and (hc.mode != RunMode.MULTIRUN or code == 130 or (code == 2 and multirun.in_sweep_process())):
        sys.exit(code)  # 130 in a submitit job: no result, so a job Slurm requeues is waited for again
    if code:  # a failed job does not stop the sweep; main() exits non-zero naming it once every job ran
        raise multirun.failed(out, code)
    if hc.mode != RunMode.MULTIRUN:
        return None
    try:
        return objective(result, cfg.objective)
    except LaunchError as e:
        print(f"gmiexp: error: {e}", file=sys.stderr, flush=True)
        raise multirun.failed(out, 1, str(e)) from None


def main() -> None:
    multirun.state["pid"] = os.getpid()
    try:
        check_overrides(sys.argv[1:])  # a misspelt key: the valid ones, not Hydra's "+key" that fails again
    except ConfigError as e:
        print(f"gmiexp: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
    try:
        hydra_main()
    except SystemExit as e:
        if e.code == 1 and not multirun.state["ran"] and not multirun.ended_elsewhere(e):
            sys.exit(2)  # Hydra rejected the config (unknown group option, typo, wrong type)
        if e.code:
            code = multirun.exit_code()  # names the failed jobs; a job in another process says why here
            sys.exit((code or 1) if e.code == 1 else e.code)
        raise
    code = multirun.exit_code()
    if code:  # a sweeper that tolerates failures (Optuna's max_failure_rate) finished anyway
        sys.exit(code)


if __name__ == "__main__":
    main()
