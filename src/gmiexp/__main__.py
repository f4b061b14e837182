"""``python -m gmiexp [overrides]``: a thin Hydra entry point around :func:`gmiexp.app.run`."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from gmiexp.config import register_configs

_state: dict = {"ran": False, "failed": []}


def conf_dir() -> str:
    """``conf/`` packaged in the wheel (gmiexp/conf) or the repository's top-level ``conf/``."""
    here = Path(__file__).resolve().parent
    for cand in (here / "conf", here.parents[1] / "conf"):
        if (cand / "config.yaml").is_file():
            return str(cand)
    raise FileNotFoundError("gmiexp's conf/ directory is missing from the installation")


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
    if code:
        _state["failed"].append(hc.runtime.output_dir)
        raise LaunchError(f"job failed (exit code {code}): {hc.runtime.output_dir}")
    if hc.mode != RunMode.MULTIRUN:
        return None
    try:
        return objective(result, cfg.objective)
    except LaunchError as e:
        print(f"gmiexp: error: {e}", file=sys.stderr, flush=True)
        _state["failed"].append(hc.runtime.output_dir)
        raise


def main() -> None:
    try:
        hydra_main()
    except SystemExit as e:
        if e.code == 1 and not _state["ran"]:
            sys.exit(2)  # Hydra rejected the config (unknown group option, typo, wrong type)
        if e.code and _state["failed"]:
            report_failed()
        raise
    if _state["failed"]:  # a sweeper that tolerates failures (Optuna's max_failure_rate) finished anyway
        report_failed()
        sys.exit(1)


def report_failed() -> None:
    print(f"gmiexp: {len(_state['failed'])} multirun job(s) failed: {', '.join(_state['failed'])}",
          file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
