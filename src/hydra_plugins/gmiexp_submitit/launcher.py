"""hydra-submitit-launcher's launchers with the job's outcome in the scheduler's state, every member collected.

Hydra's ``run_job`` catches a job's exception into its ``JobReturn``; submitit then pickles that as a
success and the Slurm job ends COMPLETED 0:0 ("Job completed successfully") even though gmiexp's training
failed. Here a job whose ``JobReturn`` failed re-raises its error inside the submitit process, so submitit
logs "Submitted job triggered an exception", the task exits 1 and Slurm (``sacct``) says FAILED. The sweep
side (``launch``) waits for every member instead of stopping at the first failed one, turns a failed
member back into a failed ``JobReturn`` (recording it in :mod:`gmiexp.multirun`, so the sweep exits 1
naming every failed run dir) and prints each member's one-line summary. A submission that sbatch refuses
for GPUs the cluster does not have exits 2 naming ``hydra.launcher.gpus_per_node=null``; a member whose config
is bad input exits 2 before anything is submitted.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher import submitit_launcher as base

log = logging.getLogger(__name__)

#: sbatch's words for a GPU request the cluster cannot serve (no gres configured, or none of that name)
GRES_REFUSALS = ("generic resource", "gres", "Invalid GRES")
_CODE = re.compile(r"job failed \(exit code (\d+)\)")


class GmiexpSubmititMixin:
    """Overrides of :class:`BaseSubmititLauncher` (job side: ``__call__``; sweep side: ``launch``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> JobReturn:
        ret: JobReturn = super().__call__(*args, **kwargs)  # type: ignore[misc]
        if ret.status == JobStatus.FAILED:
            raise ret._return_value  # submitit pickles the error and the task exits 1: Slurm says FAILED
        return ret

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
        """The plugin's ``launch`` (its executor, parameters and sweep dir as it builds them), then every member."""
        import submitit
        from hydra.core.singleton import Singleton
        from hydra.core.utils import filter_overrides
        from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
        from omegaconf import OmegaConf

        self._refuse_bad_members(job_overrides, initial_job_idx, Path(str(self.config.hydra.sweep.dir)))  # type: ignore
        p = self.params  # type: ignore[attr-defined]
        ex = self._EXECUTOR  # type: ignore[attr-defined]
        executor = submitit.AutoExecutor(cluster=ex, folder=p["submitit_folder"],
                                         **{f"{ex}_max_num_timeout": p[k] for k in ("max_num_timeout",) if k in p})
        known = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{k if k in known else f"{ex}_{k}": v for k, v in p.items()
                                      if k not in ("submitit_folder", "max_num_timeout")})
        sweep_dir = Path(str(self.config.hydra.sweep.dir))  # type: ignore[attr-defined]
        log.info(f"Submitit '{ex}' sweep output dir : {sweep_dir}")
        sweep_dir.mkdir(parents=True, exist_ok=True)
        params = []
        for k, overrides in enumerate(job_overrides):
            log.info(f"\t#{initial_job_idx + k} : {' '.join(filter_overrides(overrides))}")
            params.append((list(overrides), "hydra.sweep.dir", initial_job_idx + k, f"job_id_for_{initial_job_idx + k}",
                           Singleton.get_state()))
        try:
            jobs = executor.map_array(self, *zip(*params, strict=True))
        except submitit.core.utils.FailedJobError as e:  # sbatch refused the submission
            raise submission_error(e, p.get("gpus_per_node")) from None
        returns, lost = [], None
        for k, (j, ov) in enumerate(zip(jobs, job_overrides, strict=True)):
            try:
                returns.append(self._collect(j, list(ov), initial_job_idx + k))
            except submitit.core.utils.UncompletedJobError as e:  # killed without a result
                lost = lost or e
        if lost is not None:
            raise lost  # submitit's own error, as the plugin raises it, once every member was waited for
        return returns

    def _refuse_bad_members(self, job_overrides: Sequence[Sequence[str]], first: int, sweep_dir: Path) -> None:
        """Exit 2 before any job is queued when a member's config is bad input, naming every reason and member.

        What a job can check before it knows its node (:func:`gmiexp.app.check_job`); a refusal that needs the
        node (its rank, its GPUs) still comes from the job. A sweep dir this command created is removed.
        """
        from gmiexp.app import check_members
        from gmiexp.errors import REFUSAL_PREFIX, ConfigError
        from gmiexp.launch.ownership import discard_refused_sweep

        cfgs = [self.hydra_context.config_loader.load_sweep_config(self.config, list(o))  # type: ignore[union-attr]
                for o in job_overrides]
        try:
            check_members(cfgs, first, "nothing was submitted")
        except ConfigError as e:
            print(f"{REFUSAL_PREFIX}{e}", file=sys.stderr, flush=True)
            discard_refused_sweep(sweep_dir, f"{self.config.hydra.job.name}.log")  # type: ignore[attr-defined]
            sys.exit(2)

    def _collect(self, job: Any, overrides: list[str], idx: int) -> JobReturn:
        """The member's JobReturn; a failed one rebuilt from its run dir and exit code; its summary printed."""
        from submitit.core.utils import FailedJobError

        from gmiexp import multirun

        exc = job.exception()
        if exc is None:
            ret: JobReturn = job.results()[0]
            run_dir = Path(str(ret.working_dir or "")) if ret.hydra_cfg is None else \
                Path(str(ret.hydra_cfg.hydra.runtime.output_dir))
        else:
            if not isinstance(exc, FailedJobError):
                print(f"[#{idx}] gmiexp: no result from job {job.job_id}: {exc}", flush=True)
                raise exc
            run_dir = self._run_dir(overrides, idx)
            m = _CODE.search(str(exc))
            code = int(m.group(1)) if m else 1
            multirun.record_failure(str(run_dir), code)
            ret = JobReturn(overrides=overrides, status=JobStatus.FAILED,
                            _return_value=multirun.JobFailed(str(run_dir), code,
                                                             f"job failed (exit code {code}): {run_dir} "
                                                             f"(its output: {job.paths.stderr})"))
        print(f"[#{idx}] {member_line(run_dir)}", flush=True)
        return ret

    def _run_dir(self, overrides: list[str], idx: int) -> Path:
        """The member's run dir as its job computed it (``hydra.sweep.dir``/``hydra.sweep.subdir``)."""
        from omegaconf import open_dict

        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)  # type: ignore
        with open_dict(cfg.hydra.job):
            cfg.hydra.job.num = idx
        return Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)


def member_line(run_dir: Path) -> str:
    """The member's own last line (from its ``summary.json``), or why there is none."""
    import json

    from gmiexp.launch.summary import one_line

    try:
        return one_line(json.loads((run_dir / "summary.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return f"gmiexp: no summary in {run_dir} (the run did not train; its output names why)"


def submission_error(e: Exception, gpus: Any) -> Exception:
    """The refusal of sbatch; a GPU request the cluster cannot serve becomes a ConfigError (exit 2)."""
    from gmiexp.errors import ConfigError

    text = " ".join(str(e).split())
    if gpus and any(w.lower() in text.lower() for w in GRES_REFUSALS):
        return ConfigError(f"invalid hydra.launcher.gpus_per_node={gpus}: sbatch refused the GPU request "
                           f"({text[:300]}); valid on a cluster without GPUs: hydra.launcher.gpus_per_node=null "
                           "(or hardware=cpu / train.device=cpu, which ask for none)")
    return e


class SlurmLauncher(GmiexpSubmititMixin, base.SlurmLauncher):
    pass


class LocalLauncher(GmiexpSubmititMixin, base.LocalLauncher):
    pass
