"""``python -m gmiexp [overrides]``: a thin Hydra entry point around :func:`gmiexp.app.run`."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from gmiexp import multirun
from gmiexp.config import register_configs
from gmiexp.config.compose import conf_dir

_state = multirun.state


register_configs()


@hydra.main(version_base="1.3", config_path=conf_dir(), config_name="config")
def hydra_main(cfg: DictConfig) -> float | None:
    """One job. In a multirun it returns the run's ``objective`` metric, which sweepers such as Optuna maximise.

    A failed multirun job raises: Hydra records the job as failed, the basic sweeper finishes its batch and then
    stops, and Optuna marks the trial failed (``hydra.sweeper.max_failure_rate`` decides whether the study goes on).
    """
    from gmiexp.app import objective, run_job
    from gmiexp.errors import LaunchError

    _state["ran"] = True
    hc = HydraConfig.get()
    code, result = run_job(cfg, Path(hc.runtime.output_dir))
    if code and (hc.mode != RunMode.MULTIRUN or code in (2, 130)):
        sys.exit(code)
    if code:  # a failed job does not stop the sweep; main() exits 1 naming it once every job ran
        multirun.record_failure(hc.runtime.output_dir)
        raise LaunchError(f"job failed (exit code {code}): {hc.runtime.output_dir}")
    if hc.mode != RunMode.MULTIRUN:
        return None
    try:
        return objective(result, cfg.objective)
    except LaunchError as e:
        print(f"gmiexp: error: {e}", file=sys.stderr, flush=True)
        multirun.record_failure(hc.runtime.output_dir)
        raise


def main() -> None:
    try:
        hydra_main()
    except SystemExit as e:
        if e.code == 1 and not _state["ran"]:
            sys.exit(2)  # Hydra rejected the config (unknown group option, typo, wrong type)
        if e.code:
            multirun.exit_code()  # names the failed jobs
        raise
    if multirun.exit_code():  # a sweeper that tolerates failures (Optuna's max_failure_rate) finished anyway
        sys.exit(1)


if __name__ == "__main__":
    main()
