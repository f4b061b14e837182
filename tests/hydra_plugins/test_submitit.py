"""hydra-submitit-launcher runs gmiexp sweeps: Slurm jobs of launch.nnodes nodes x 1 task; submitit_local end to end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from gmitest import FAST, cli_env, gmiexp_workers, run_cli

submitit = pytest.importorskip("submitit")

MEMBER = ["hardware=cpu", *FAST, "max_iterations=2", "num_gpus=1", "gmis_per_gpu=1"]


def slurm_launcher_params(tmp_path: Path, *overrides: str) -> dict:
    """The launcher's parameters as hydra-submitit-launcher instantiates them from ``hydra/launcher=gmiexp_slurm``."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from gmiexp.config.compose import conf_dir
    from gmiexp.config.registration import register_configs

    register_configs()
    with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["hydra/launcher=gmiexp_slurm", *overrides,
                                                       f"hydra.sweep.dir={tmp_path}"], return_hydra_config=True)
    return instantiate(cfg.hydra.launcher).params


def sbatch_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, params: dict) -> str:
    """The sbatch file submitit writes for one member, built as ``BaseSubmititLauncher.launch`` builds its executor
    (a stand-in ``srun`` on PATH: submitit refuses to build a Slurm executor where there is none)."""
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from omegaconf import OmegaConf

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    init = {"folder": params["submitit_folder"], "slurm_max_num_timeout": params["max_num_timeout"]}
    executor = submitit.AutoExecutor(cluster="slurm", **init)
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()
                                  if k not in ("submitit_folder", "max_num_timeout")})
    return executor._executor._make_submission_file_text(executor._executor._submitit_command_str, "uid")


def test_gmiexp_slurm_submits_launch_nnodes_nodes_with_one_launcher_each(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    params = slurm_launcher_params(tmp_path, "launch.nnodes=4", "num_gpus=8", "hydra.launcher.partition=gpu",
                                   "experiment=ant8")
    assert (params["nodes"], params["tasks_per_node"], params["gpus_per_node"]) == (4, 1, 8)
    assert params["max_num_timeout"] == 3  # gmiexp resumes a requeued job: a time limit may requeue it
    script = sbatch_script(monkeypatch, tmp_path, params)
    for line in ("#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
                 "#SBATCH --partition=gpu", "#SBATCH --signal=USR2@120", "#SBATCH --job-name=gmiexp-ant8"):
        assert line in script, script
    srun = next(ln for ln in script.splitlines() if ln.startswith("srun "))
    assert "-m submitit.core._submit" in srun  # one srun step: every task runs the member's gmiexp launcher


def test_the_cli_shows_the_launcher_tied_to_launch_nnodes() -> None:
    r = run_cli("hydra/launcher=gmiexp_slurm", "launch.nnodes=3", "--cfg", "hydra", "--package", "hydra.launcher")
    assert r.returncode == 0, r.stderr
    assert "nodes: ${launch.nnodes}" in r.stdout and "tasks_per_node: 1" in r.stdout
    assert "gpus_per_node: ${gmiexp_slurm_gpus:${hardware.name},${train.device},${num_gpus}}" in r.stdout
    assert "hydra_plugins.gmiexp_submitit.launcher.SlurmLauncher" in r.stdout


@pytest.mark.parametrize("no_gpu", ["hardware=cpu", "train.device=cpu", "train.device=lazy"])
def test_a_run_without_gpus_asks_slurm_for_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_gpu: str) -> None:
    """A cluster without gres refuses --gpus-per-node ("Invalid generic resource"): a CPU run asks for none."""
    params = slurm_launcher_params(tmp_path, "num_gpus=2", no_gpu)
    assert params["gpus_per_node"] is None
    assert "--gpus-per-node" not in sbatch_script(monkeypatch, tmp_path, params)


def test_sbatch_refusing_the_gpus_exits_2_naming_gpus_per_node_null() -> None:
    from submitit.core.utils import FailedJobError

    from gmiexp.errors import ConfigError
    from hydra_plugins.gmiexp_submitit.launcher import submission_error

    e = submission_error(FailedJobError("sbatch: error: Invalid generic resource (gres) specification"), 8)
    assert isinstance(e, ConfigError)
    assert "invalid hydra.launcher.gpus_per_node=8" in str(e) and "hydra.launcher.gpus_per_node=null" in str(e)
    other = FailedJobError("sbatch: error: invalid partition specified: gpu")
    assert submission_error(other, 8) is other  # other refusals stay submitit's


GMIEXP_LOCAL = ["hydra/launcher=submitit_local",
                "hydra.launcher._target_=hydra_plugins.gmiexp_submitit.launcher.LocalLauncher"]


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_a_failed_member_fails_its_job_while_the_sweep_collects_every_member(tmp_path: Path) -> None:
    """gmiexp_slurm's launcher class on submitit's local executor: the failed member's job ends with an error (Slurm:
    FAILED), the other trains, the sweep exits 1 naming the failed one and prints each member's summary line."""
    r = run_cli("-m", *GMIEXP_LOCAL, *MEMBER, "launch.inprocess=true", "role=ppo,user_roles:FailRole",
                f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == 1, r.stderr[-3000:]
    assert f"1 multirun job(s) failed: {tmp_path / '1'}" in r.stderr
    assert "[#0] gmiexp ok: task=Cartpole" in r.stdout and f"[#1] gmiexp: no summary in {tmp_path / '1'}" in r.stdout
    logs = {p.name: p.read_text() for p in (tmp_path / ".submitit").glob("*/*_log.err")}
    failed = [t for t in logs.values() if "Submitted job triggered an exception" in t]
    assert len(failed) == 1 and "FailRole fails on purpose" in failed[0], logs
    assert sum("Job completed successfully" in t for t in logs.values()) == 1


@pytest.mark.parametrize("existing", [False, True], ids=["new-dir", "existing-dir"])
def test_bad_members_exit_2_naming_each_reason_before_any_job_is_submitted(tmp_path: Path, existing: bool) -> None:
    """Every member's config is checked in the sweep's process: no job queued, no sweep dir left that was not there."""
    sweep = tmp_path / "sweep"
    if existing:
        sweep.mkdir()
    r = run_cli("-m", *GMIEXP_LOCAL, *MEMBER, "train.gamma=2,0.9", "num_envs=0,4", f"hydra.sweep.dir={sweep}")
    assert r.returncode == 2, r.stderr[-3000:]
    # 4 members, one with both bad values: each reason on one line, naming the two members that hold it
    assert re.search(r"^gmiexp: error: invalid num_envs: 0; valid: >= 1 \(environments per GMI\) \(members #\d, #\d; "
                     r"nothing was submitted\)$", r.stderr, re.M), r.stderr
    assert re.search(r"^gmiexp: error: invalid train.gamma: 2.0; valid: 0..1 \(members #\d, #\d; nothing was "
                     r"submitted\)$", r.stderr, re.M), r.stderr
    assert r.stderr.count("gmiexp: error:") == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert sweep.is_dir() == existing  # a dir that was there keeps only Hydra's record, as other launchers leave it
    assert not existing or {p.name for p in sweep.iterdir()} == {"multirun.yaml"}


def test_an_rl_games_files_refused_keys_are_named_once_each_with_every_member_that_uses_it(tmp_path: Path) -> None:
    """Each key of the file gmiexp cannot honour is its own reason, as a bad value is (errors.ConfigError.reasons)."""
    import yaml

    from gmiexp.config.rlgames_yaml import locate

    doc = yaml.safe_load(locate("rl_games:configs/mujoco/ant_envpool.yaml").read_text())
    doc["params"]["config"]["my_knob"] = True
    doc["params"]["algo"]["name"] = "sac"
    bad = tmp_path / "ant_bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    r = run_cli("-m", *GMIEXP_LOCAL, *MEMBER, "train=rlgames", f"train.file={bad}", "seed=1,2",
                f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert r.returncode == 2, r.stderr[-3000:]
    for key in ("params.algo.name='sac'", "params.config.my_knob=True"):
        assert re.search(rf"^gmiexp: error: invalid train.file={re.escape(str(bad))}: {re.escape(key)}: .* \(members "
                         r"#0, #1; nothing was submitted\)$", r.stderr, re.M), r.stderr
    assert r.stderr.count("gmiexp: error:") == 2 and not (tmp_path / "sweep").exists(), r.stderr


def test_submitit_local_runs_a_two_member_sweep_of_one_node_runs(tmp_path: Path) -> None:
    r = run_cli("-m", "hydra/launcher=submitit_local", *MEMBER, "seed=1,2", f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    summaries = [json.loads((tmp_path / str(i) / "summary.json").read_text()) for i in (0, 1)]
    assert [s["status"] for s in summaries] == ["ok", "ok"]
    assert [s["config"]["seed"] for s in summaries] == [1, 2]
    assert len(list((tmp_path / ".submitit").glob("*/*_result.pkl"))) == 2  # two submitit jobs, one per member


# FailRole's GMI runs in its job's launcher (launch.inprocess: no fork server to start in each job, seconds of CPU
# less); test_submitit_local_runs_a_two_member_sweep_of_one_node_runs runs the GMIs of submitit jobs as processes
@pytest.mark.parametrize(("bad", "code"), [("role=user_roles:FailRole launch.inprocess=true", 1),
                                           ("launch.node_rank=3", 2)])
def test_a_failed_submitit_job_is_named_with_its_exit_code(tmp_path: Path, bad: str, code: int) -> None:
    r = run_cli("-m", "hydra/launcher=submitit_local", *MEMBER, *bad.split(), "seed=1,2", f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == code, r.stderr[-3000:]
    assert f"2 multirun job(s) failed: {tmp_path / '0'}, {tmp_path / '1'}" in r.stderr
    assert "UncompletedJobError" not in r.stderr


@pytest.mark.slow  # submitit gives a job's missing result 15 s to appear
def test_a_submitit_job_killed_without_a_result_fails_the_sweep_with_1(tmp_path: Path, no_orphans: None) -> None:
    """Its node launcher killed (kill -9): submitit reports a job without output; that is no config error (2)."""
    cmd = [sys.executable, "-m", "gmiexp", "-m", "hydra/launcher=submitit_local", "hardware=cpu", *FAST,
           "max_iterations=500", "num_gpus=1", "gmis_per_gpu=1", "seed=1", f"hydra.sweep.dir={tmp_path}"]
    main = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
                            start_new_session=True)
    try:
        deadline = time.time() + 120
        while not (tmp_path / "0" / "gmis" / "0" / "history.jsonl").exists() and time.time() < deadline:
            time.sleep(0.1)
        task = next(p for p in psutil.Process(main.pid).children(recursive=True)
                    if "submitit.core._submit" in " ".join(p.cmdline()))
        task.kill()
        _, err = main.communicate(timeout=120)
    finally:
        if main.poll() is None:
            os.killpg(main.pid, signal.SIGKILL)
            main.wait()
    assert main.returncode == 1, err[-3000:]
    assert "has not produced any output" in err
    assert not gmiexp_workers(tmp_path / "0")  # its GMI went with it (launch.lifeline)


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_optuna_reads_each_submitit_jobs_objective(tmp_path: Path) -> None:
    """A job's return value (the objective) comes back to the sweeper through submitit's result."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    r = run_cli("-m", "hydra/sweeper=optuna", "hydra/launcher=submitit_local", "hydra.sweeper.direction=maximize",
                "hydra.sweeper.n_trials=2", "hydra.sweeper.sampler.seed=1", "num_envs=choice(16,32)",
                "seed=choice(1,2)", *MEMBER, "launch.inprocess=true", f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    best = max(json.loads((tmp_path / str(i) / "summary.json").read_text())["metrics"]["perf/env_steps_per_s"]
               for i in (0, 1))
    assert f"best_value: {best}" in (tmp_path / "optimization_results.yaml").read_text()
