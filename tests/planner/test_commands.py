"""mode=plan's per-node commands: plain per node, one srun line, the torchrun equivalent; MPR across nodes exits 2."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from gmitest import compose_config, run_cli, run_here

from gmiexp.app import run_plan
from gmiexp.launch.launcher import free_port
from gmiexp.plan import Plan
from gmiexp.planner.build import build_plan
from gmiexp.planner.commands import node_commands, node_overrides

DGX4 = ["mode=plan", "hardware=dgx_a100", "hardware.mig=false", "num_gpus=8", "gmis_per_gpu=2", "backend=mps",
        "launch.nnodes=4", "launch.rdzv_endpoint=node001:29400"]


# run_here: for what only reads the reduction's choice or a refusal; the per-node commands, which come from the
# CLI's own overrides, stay a real launch (test_four_dgx_nodes_plan); a job's exit 2 through the CLI is launched by
# tests/test_cli_errors.py::test_cli_value_error_exits_2


def test_four_dgx_nodes_plan(tmp_path: Path) -> None:
    r = run_cli(*DGX4, f"hydra.run.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-2000:]
    plan = Plan.from_dict(yaml.safe_load(r.stdout))  # stdout stays the Plan
    assert plan.world_size == 64 and plan.nnodes == 4 and {g.node for g in plan.gmis} == {0, 1, 2, 3}
    err = r.stderr
    # the default reduction follows Algorithm 1 on GPUs
    assert "plan: 64 GMIs on 4 nodes (16 per node on 8 GPUs); reduction mrr: auto (Algorithm 1 across 4 nodes)" in err
    nodes = [line.split(": ", 1)[1] for line in err.splitlines() if line.startswith("  node ")]
    assert len(nodes) == 4
    for rank, cmd in enumerate(nodes):
        args = shlex.split(cmd)
        assert args[:3] == ["python", "-m", "gmiexp"]
        assert f"launch.node_rank={rank}" in args and "launch.nnodes=4" in args
        assert "launch.rdzv_endpoint=node001:29400" in args and "mode=plan" not in args
        assert "hardware=dgx_a100" not in args and "hardware.network_gbps=200" in args  # a preset only plans
    assert ("srun --nodes=4 --ntasks-per-node=1 python -m gmiexp num_gpus=8 gmis_per_gpu=2 backend=mps "
            "hardware.network_gbps=200 launch.nnodes=4 launch.rdzv_endpoint=$HEAD:29400 "
            "hydra.run.dir=outputs/default/$SLURM_JOB_ID") in err  # one run dir for all tasks and requeues
    assert ("torchrun --nnodes=4 --node-rank=$R --nproc-per-node=16 --rdzv-backend=c10d "
            "--rdzv-endpoint=node001:29400 --rdzv-id=gmiexp -m gmiexp.launch.worker $RUN_DIR/node$R/plan.yaml") in err
    assert "B3=25.0 GB/s between nodes (network 200 Gb/s per node (preset:dgx_a100))" in err
    assert plan.notes["node_commands"]["plain"] == nodes


def test_auto_reduction_across_nodes_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = run_here(capsys, tmp_path, *DGX4, "reduction=auto")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "reduction mrr: auto (Algorithm 1 across 4 nodes): 2 GMIs per GPU <= 32 GPUs" in r.stderr
    assert "MPL=[[0, 1], [2, 3], ..., [62, 63]] (32 GPUs on 4 nodes)" in r.stderr


def test_node_overrides_replace_the_node_fields() -> None:
    args, notes = node_overrides(["mode=plan", "task=Ant", "launch.node_rank=3", "+launch.nnodes=2",
                                  "hardware=h100x8", "hardware.mig=false", "hardware.network_gbps=3200"])
    assert args == ["task=Ant", "hardware.network_gbps=3200"]  # the user's network wins over the preset's
    assert notes == ["hardware=h100x8 hardware.mig=false dropped: a preset only plans; "
                     "each node discovers its own GPUs"]
    assert node_overrides(["hardware=cpu", "seed=1"]) == (["hardware=cpu", "seed=1"], [])


def test_run_plan_without_hydra(tmp_path: Path, capsys) -> None:
    cfg = compose_config("mode=plan", "hardware=cpu", "task=Cartpole", "launch.nnodes=2",
                         f"launch.rdzv_endpoint=127.0.0.1:{free_port()}")
    assert run_plan(cfg, tmp_path, overrides=["task=Cartpole", "name with space=1"])["status"] == "ok"
    err = capsys.readouterr().err
    assert "plan: 4 GMIs on 2 nodes" in err and "'name with space=1'" in err  # quoted for the shell
    plan, _ = build_plan(compose_config("mode=plan", "hardware=cpu", "launch.nnodes=3",
                                        "launch.rdzv_endpoint=head:29500"), tmp_path)
    cmds = node_commands(plan, [])
    assert cmds["plain"][2] == "python -m gmiexp launch.nnodes=3 launch.node_rank=2 launch.rdzv_endpoint=head:29500"
    assert "launch.rdzv_endpoint=$HEAD:29500" in cmds["srun"]


def test_mpr_across_nodes_exits_2_before_launching(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = run_here(capsys, tmp_path, "task=Cartpole", "hardware=cpu", "num_gpus=1", "gmis_per_gpu=2", "reduction=mpr",
                 "launch.nnodes=2", "launch.node_rank=0", f"launch.rdzv_endpoint=127.0.0.1:{free_port()}")
    assert r.returncode == 2, r.stderr[-2000:]
    assert ("invalid reduction: 'mpr' with trainer GMIs on 2 nodes (launch.nnodes=2): MPR reduces through one "
            "host's shared memory and stays inside a node; valid for this layout: mrr, har, allreduce, auto"
            ) in r.stderr
    assert not any(p.name in ("plan.yaml", "status", "node0", "summary.json") for p in tmp_path.iterdir())
