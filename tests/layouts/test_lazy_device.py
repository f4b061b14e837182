"""Every layout end to end on the ``lazy`` stand-in accelerator (train.device=lazy).

A lazy tensor refuses to meet a host tensor, as a CUDA tensor does, so a role that forgets a
``.to(device)`` (envpool's host observations into the model, a host tensor concatenated with
device gradients, ...) fails here instead of on a GPU. Between them the cases cover an envpool
task (host observations) and the torch Cartpole in every layout, every reduction (allreduce, MPR,
MRR, HAR; device tensors staged through the host), both channel modes and off-policy replay.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gmitest import run_cli, slow_where

from gmiexp.plan import Plan

LAZY = ["train.device=lazy", "num_envs=16", "max_iterations=2", "launch.progress=false",
        "train.horizon_length=8", "train.minibatch_size=128", "train.mini_epochs=1",
        "async_train.max_policy_lag=100"]
ANT, CARTPOLE = "task=Ant", "task=Cartpole"

CASES = {
    "tcg-ant": ["layout=tcg", ANT, "gmis_per_gpu=1"],
    "tcg-cartpole": ["layout=tcg", CARTPOLE, "gmis_per_gpu=1"],
    "tdg-ant": ["layout=tdg", ANT],
    "tdg-cartpole": ["layout=tdg", CARTPOLE],
    "tcg_ex-ant": ["layout=tcg_ex", ANT, "gmis_per_gpu=1"],  # rl-games' PPO (one GMI: see gmiexp.device)
    "tcg_ex-cartpole": ["layout=tcg_ex", CARTPOLE, "gmis_per_gpu=1"],
    # two trainers on two GPUs (one ring per GPU index), every tensor its own transfer
    "tdg_ex-ant-mrr-uni": ["layout=tdg_ex", ANT, "num_gpus=2", "gmis_per_gpu=1", "reduction=mrr", "channel=uni"],
    # two trainers sharing a GPU: shared-memory reduction with device-to-host staging
    "tdg_ex-cartpole-mpr-multi": ["layout=tdg_ex", CARTPOLE, "gmis_per_gpu=2", "layout.trainers_per_gpu=2",
                                  "reduction=mpr", "channel=multi"],
    "decoupled_async-ant-har-multi": ["layout=decoupled_async", ANT, "num_gpus=2", "gmis_per_gpu=1",
                                      "layout.trainers_per_gpu=2", "reduction=har", "channel=multi"],
    "decoupled_async-cartpole-allreduce-uni": ["layout=decoupled_async", CARTPOLE, "num_gpus=2", "gmis_per_gpu=1",
                                               "layout.trainers_per_gpu=2", "reduction=allreduce", "channel=uni",
                                               "async_train.replay_ratio=1"],
}


#: one case per layout runs by default (tcg_ex's on lazy: tests/rl/rlgames/test_agent_lazy.py, 2 GMIs; tcg's on lazy:
#: tests/layouts/test_layout_runs.py's test_serving_layouts_report_pps[tcg], the torch Cartpole); the others
#: (other task, channel or reduction) are slow
SLOW_CASES = {"tcg-ant", "tcg-cartpole", "tdg-ant", "tcg_ex-ant", "tcg_ex-cartpole", "tdg_ex-ant-mrr-uni",
              "decoupled_async-ant-har-multi"}


@pytest.mark.parametrize("case", slow_where(CASES, SLOW_CASES))
def test_layout_runs_on_lazy(case: str, tmp_path: Path, no_orphans: None) -> None:
    check_run(tmp_path / "run", [*LAZY, *CASES[case]], "lazy")


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(CASES))
def test_layout_runs_on_cuda(case: str, tmp_path: Path, no_orphans: None) -> None:
    """The same matrix on a GPU host: NCCL sub-groups, pinned staging and real kernels (``pytest -m gpu``)."""
    import torch

    gpus = next((int(a.split("=")[1]) for a in CASES[case] if a.startswith("num_gpus=")), 1)
    if torch.cuda.device_count() < gpus:
        pytest.skip(f"needs {gpus} CUDA GPUs")
    cuda = [a.replace("train.device=lazy", "train.device=cuda") for a in LAZY]
    check_run(tmp_path / "run", [*cuda, *CASES[case]], "cuda")


def check_run(run_dir: Path, overrides: list[str], device: str) -> None:
    r = run_cli(*overrides, f"hydra.run.dir={run_dir}", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    plan = Plan.load(run_dir / "plan.yaml")
    assert plan.train.device == device
    s = json.loads((run_dir / "summary.json").read_text())
    gmis = {g.id: s["gmis"][str(g.id)] for g in plan.gmis}
    trainers = [gmis[t] for t in plan.trainer_group]
    if plan.layout in ("tdg_ex", "decoupled_async"):
        assert len(trainers) == 2 and all(t["updates"] > 0 and t["seq_errors"] == 0 for t in trainers)
        # the reduction really summed device tensors: every trainer ends with the same weights
        assert len({t["weights_digest"] for t in trainers}) == 1
        assert trainers[0]["weights_digest"] != trainers[0]["start_digest"]
    elif plan.layout == "tcg_ex":
        assert gmis[0]["epochs"] == 2
    else:
        assert sum(g.get("predictions", 0) for g in gmis.values()) > 0
