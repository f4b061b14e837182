"""A node launcher as a Slurm task: the rendezvous on the step's first host, one task per node or exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from gmitest import compose_config

from gmiexp.app import run
from gmiexp.config import LaunchConfig
from gmiexp.errors import ConfigError
from gmiexp.planner.nodes import resolve_nodes
from gmiexp.planner.slurm import PORTS

#: what srun gives task 1 of a 2-node step of array job 900, task 3 (a hydra-submitit-launcher sweep member)
TASK1 = {"SLURM_NODEID": "1", "SLURM_JOB_ID": "903", "SLURM_ARRAY_JOB_ID": "900", "SLURM_ARRAY_TASK_ID": "3",
         "SLURM_JOB_NODELIST": "gpu[007-008]", "SLURM_STEP_NODELIST": "gpu[007-008]",
         "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "2"}


def test_every_task_meets_on_the_steps_first_host_at_a_port_from_the_job_id() -> None:
    ends = {resolve_nodes(LaunchConfig(nnodes=2), {**TASK1, "SLURM_NODEID": r}).rdzv_endpoint for r in ("0", "1")}
    assert len(ends) == 1
    host, port = ends.pop().rsplit(":", 1)
    assert host == "gpu007" and PORTS[0] <= int(port) <= PORTS[1]
    other = resolve_nodes(LaunchConfig(nnodes=2), {**TASK1, "SLURM_ARRAY_TASK_ID": "4"}).rdzv_endpoint
    assert other.startswith("gpu007:") and other != f"{host}:{port}"  # another member on the same head: another port


def test_the_steps_node_list_wins_over_the_jobs_and_a_given_endpoint_is_kept() -> None:
    env = {**TASK1, "SLURM_JOB_NODELIST": "gpu[001-008]", "SLURM_STEP_NODELIST": "gpu[005,007]"}
    assert resolve_nodes(LaunchConfig(nnodes=2), env).rdzv_endpoint.startswith("gpu005:")
    assert resolve_nodes(LaunchConfig(nnodes=2, rdzv_endpoint="head:29400"), env).rdzv_endpoint == "head:29400"


@pytest.mark.parametrize(("launch", "env", "named"), [
    (dict(nnodes=2), {**TASK1, "SLURM_STEP_NUM_NODES": "1"}, "launch.nnodes=2 for this Slurm step of 1 node"),
    (dict(nnodes=2), {**TASK1, "SLURM_STEP_NUM_TASKS": "4"}, "4 tasks (SLURM_STEP_NUM_TASKS)"),
    (dict(nnodes=2), {**TASK1, "SLURM_STEP_NODELIST": "", "SLURM_JOB_NODELIST": ""}, "launch.rdzv_endpoint=null"),
    (dict(nnodes=2, node_rank=1), TASK1, "launch.rdzv_endpoint=null"),  # a rank of the user's: its endpoint too
])
def test_a_step_that_is_not_one_task_per_node_or_gives_no_endpoint_exits_2(launch: dict, env: dict,
                                                                           named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        resolve_nodes(LaunchConfig(**launch), env)


def test_a_one_node_run_in_a_step_of_one_task_is_node_0() -> None:
    one = {**TASK1, "SLURM_NODEID": "0", "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NUM_TASKS": "1"}
    lc = resolve_nodes(LaunchConfig(nnodes=1), one)
    assert (lc.node_rank, lc.rdzv_endpoint) == (0, None)


def test_two_tasks_on_one_node_with_nnodes_1_exit_2() -> None:
    """hydra.launcher.tasks_per_node=2 with launch.nnodes=1: both tasks would train into one run dir."""
    two = {**TASK1, "SLURM_NODEID": "0", "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NUM_TASKS": "2"}
    with pytest.raises(ConfigError, match=r"2 tasks \(SLURM_STEP_NUM_TASKS\) for launch.nnodes=1.*"
                                          r"hydra.launcher.tasks_per_node=1"):
        resolve_nodes(LaunchConfig(nnodes=1), two)


def test_mode_plan_in_a_slurm_task_shows_the_derived_endpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # the job in this process, in the task's environment (a launch costs 3-4 s of CPU): the plan printed is what
    # this reads; mode=plan's real CLI path is launched by
    # tests/test_app.py::test_plan_stdout_is_yaml_on_a_fresh_machine
    for key, value in TASK1.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = run(compose_config("mode=plan", "hardware=cpu", "task=Cartpole", "launch.nnodes=2"), tmp_path)
    out = capsys.readouterr()
    assert code == 0, out.err
    launch = yaml.safe_load(out.out)["launch"]
    assert launch["node_rank"] == 1 and launch["rdzv_endpoint"].startswith("gpu007:") and launch["rdzv_id"] == "903"


def test_the_documented_sbatch_script_appends_its_log_and_fails_with_its_run() -> None:
    """A requeue must not empty the first attempt's log; a bare ``wait`` would end a failed run COMPLETED."""
    import re
    import subprocess

    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *sorted((root / "docs").glob("**/*.md"))]
    blocks = [b for p in pages if p.exists() for b in re.findall(r"```bash\n(.*?)```", p.read_text(), re.S)
              if "#SBATCH --nodes" in b]
    assert blocks, "no sbatch script in README.md or docs/"
    for script in blocks:
        assert "#SBATCH --open-mode=append" in script and "#SBATCH --requeue" in script
        assert re.search(r"^wait \$!", script, re.M), script
        assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
