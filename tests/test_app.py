"""The CLI's modes: plan prints a complete Plan and launches nothing; doctor reports the host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gmitest import cli_env, fresh_caches, run_cli, run_here

from gmiexp.plan import Plan

# run_here: the CLI's own plan and doctor paths are launched by test_plan_stdout_is_yaml_on_a_fresh_machine and
# test_plan_and_doctor_import_nothing_heavy


def test_plan_mode_dgx_mps_prints_complete_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = run_here(capsys, tmp_path, "mode=plan", "hardware=dgx_a100", "hardware.mig=false", "num_gpus=4",
                 "gmis_per_gpu=3", "backend=mps")
    assert r.returncode == 0, r.stderr
    plan = Plan.from_dict(yaml.safe_load(r.stdout))
    assert plan.world_size == 12 and plan.backend == "mps"
    assert [g.env["CUDA_VISIBLE_DEVICES"] for g in plan.gmis[::3]] == ["0", "1", "2", "3"]
    assert all(g.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "33" for g in plan.gmis)
    assert any("nvidia-cuda-mps-control -d" in c for c in plan.setup_commands)
    assert any("quit" in c for c in plan.teardown_commands)
    assert not (tmp_path / "gmis").exists() and not (tmp_path / "mps").exists()


def test_plan_mode_h200_mig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = run_here(capsys, tmp_path, "mode=plan", "hardware=h200x1", "hardware.mig=true", "gmis_per_gpu=3", "backend=mig")
    assert r.returncode == 0, r.stderr
    plan = Plan.from_dict(yaml.safe_load(r.stdout))
    assert {g.share for g in plan.gmis} == {"2g.35gb"}
    assert any("nvidia-smi mig -i 0 -cgi" in c for c in plan.setup_commands)


def test_doctor_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = run_here(capsys, tmp_path, "mode=doctor")
    assert r.returncode == 0, r.stderr
    assert "gmiexp doctor" in r.stdout and "direct yes" in r.stdout


def test_plan_mode_serving_layout_has_no_reduction_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = run_here(capsys, tmp_path, "mode=plan", "layout=tcg", "task=Ant", "hardware=dgx_a100", "hardware.mig=false",
                 "backend=mps", "gmis_per_gpu=2")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "reduction cost: none (no trainer GMIs" in r.stderr


def test_multirun_runs_every_job_and_exits_1_when_one_failed(tmp_path: Path) -> None:
    # each job's one GMI in the launcher's process (launch.inprocess): the sweep's handling of a failed job is
    # what this checks, and no fork server to start saves seconds of CPU per job
    r = run_cli("-m", "role=user_roles:FailRole,ppo", "task=Cartpole", "num_gpus=1", "gmis_per_gpu=1",
                "num_envs=16", "max_iterations=1", "launch.progress=false", "launch.inprocess=true",
                f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == 1, r.stderr[-2000:]
    assert "1 multirun job(s) failed" in r.stderr and str(tmp_path / "0") in r.stderr
    assert (tmp_path / "1" / "summary.json").exists()  # the sweep went on past the failure


@pytest.mark.parametrize("args", [["mode=plan"], ["mode=plan", "hardware=dgx_a100", "hardware.mig=false", "backend=mps",
                                                 "task=Humanoid"]])
def test_plan_stdout_is_yaml_on_a_fresh_machine(args: list[str], tmp_path: Path) -> None:
    """Empty caches: a first import of matplotlib would log "generated new fontManager"; stdout stays the Plan."""
    r = run_cli(*args, f"hydra.run.dir={tmp_path / 'run'}", env=fresh_caches(tmp_path / "caches"))
    assert r.returncode == 0, r.stderr[-2000:]
    plan = Plan.from_dict(yaml.safe_load(r.stdout))
    assert plan.world_size >= 1
    assert r.stdout.startswith("gmis:")


HEAVY = ("rl_games", "matplotlib", "envpool", "wandb", "mujoco", "gymnasium.envs.mujoco")
#: every case in one process, one after another (a launch costs 3-4 s of CPU): the heavy modules present after each
#: case; one imported by any case stays in sys.modules, so the case that imported it is the first that lists it
PROBE = """import json, os, sys
from gmiexp.__main__ import main
seen = []
for i, args in enumerate({cases}):
    sys.argv = ["gmiexp", *args, "hydra.run.dir=" + os.path.join(os.environ["PROBE_RUN"], str(i))]
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    seen.append([args, code, sorted(m for m in {heavy} if m in sys.modules)])
    open(os.environ["PROBE_OUT"], "w").write(json.dumps(seen))
"""
PROBE_CASES = [["mode=plan"], ["mode=plan", "layout=tdg_ex", "task=Humanoid"], ["mode=plan", "task=Cartpole"],
               ["mode=doctor"], ["mode=plan", "task=Pong"], ["mode=plan", "task=AntGym", "layout=tdg_ex"]]


def test_plan_and_doctor_import_nothing_heavy(tmp_path: Path) -> None:
    out = tmp_path / "modules.json"
    code = PROBE.format(heavy=HEAVY, cases=PROBE_CASES)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                       env={**cli_env(), "PROBE_OUT": str(out), "PROBE_RUN": str(tmp_path / "run")})
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(out.read_text()) == [[args, 0, []] for args in PROBE_CASES], r.stderr[-2000:]


BAD_RSLRL = "algorithm:\n  class_name: Distillation\ntypo_key: 1\n"
RSLRL = ["train=rslrl", "task=Cartpole", "task.vec_env=rslrl_vecenv:make"]


@pytest.mark.parametrize(("overrides", "reason"), [
    (["layout=tdg_ex", "train.info_key=x_velocity"], "invalid train.info_key=x_velocity"),
    (["layout=tcg", "launch.reshape=auto"], "invalid launch.reshape=auto with layout=tcg"),
    (["launch.reshape=auto", "launch.nnodes=2"], "invalid launch.reshape=auto with launch.nnodes=2"),
    (["launch.reshape=auto", "launch.inprocess=true"], "invalid launch.reshape=auto with launch.inprocess=true"),
    ([*RSLRL, "train.file={bad}"], "invalid rsl_rl config train.file={bad}: 2 key(s)"),
    ([*RSLRL, "layout=tdg_ex"], "invalid layout for train=rslrl: 'tdg_ex'; valid: tcg_ex"),
    (["role=ppoo"], "invalid role: 'ppoo'; valid: "),
])
def test_a_job_refuses_before_its_node_what_its_plan_would_refuse_without_it(
        overrides: list[str], reason: str, tmp_path: Path) -> None:
    """``check_job`` is what ``gmiexp_slurm`` runs for every member before it submits any. Before, each of these
    passed it (only the plan on the job's node refused them), so a sweep queued jobs that could only exit 2."""
    from gmiexp.app import check_job
    from gmiexp.config.compose import compose_config
    from gmiexp.errors import ConfigError

    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_RSLRL)
    with pytest.raises(ConfigError) as e:
        check_job(compose_config(*(o.format(bad=bad) for o in overrides)))
    assert reason.format(bad=bad) in str(e.value)


def test_a_jobs_module_role_is_imported_where_the_job_runs_not_before(tmp_path: Path) -> None:
    """A ``module:Class`` role may import what only the job's node has: the plan there refuses it, not the sweep."""
    from gmiexp.app import check_job
    from gmiexp.config.compose import compose_config
    from gmiexp.errors import ConfigError
    from gmiexp.planner.build import build_plan

    cfg = compose_config("role=nosuch_module:Role", "mode=plan")
    assert check_job(cfg).role == "nosuch_module:Role"
    with pytest.raises(ConfigError, match="cannot import module 'nosuch_module'"):
        build_plan(cfg, tmp_path / "run")
