"""rl-games' PPO in several GMIs (layout tcg_ex) on the ``lazy`` stand-in device.

rl-games 1.6.5 hands device tensors to the process group itself (initial weights, KL, learning
rate, stop flag, the central value net's gradients); gloo returns lazy tensors unreduced without
an error, and lazy tensors cannot be pickled. gmiexp's agent does all of it through its own
communication layer, so on ``lazy`` every GMI must end every epoch with bit-identical weights and
normalisers (``train.check_sync``: a digest per epoch, compared across GMIs, raising on divergence).

The matrix: 2 GMIs on 1 GPU (allreduce, MPR, HAR; MRR needs GMIs per GPU <= GPUs) and 2 GMIs on
each of 2 logical GPUs (every reduction), for Ant (envpool, host observations), the torch Cartpole
(discrete actions) and mjlab's Cartpole (its critic: rl-games' central value net). Each run is
shared by the tests below (module-scoped), so the suite pays for it once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gmitest import gmiexp_workers, run_cli

from gmiexp.plan import Plan
from gmiexp.status import read_history

SMALL = ["layout=tcg_ex", "train.device=lazy", "num_envs=8", "max_iterations=2", "train.horizon_length=8",
         "train.minibatch_size=32", "train.mini_epochs=2", "train.check_sync=true", "launch.progress=false",
         "launch.heartbeat_timeout_s=600"]  # a first mjlab run compiles Warp kernels for minutes on a busy host
ONE_GPU, TWO_GPUS = ["num_gpus=1", "gmis_per_gpu=2"], ["num_gpus=2", "gmis_per_gpu=2"]
TASKS = {"ant": ["task=Ant"], "cartpole": ["task=Cartpole"], "mjlab": ["task=MjlabCartpole"]}

#: (task, GPUs, reduction): every reduction each layout allows, every task on both layouts.
CASES = [
    ("ant", 1, "mpr"),
    ("mjlab", 1, "har"),
    ("cartpole", 2, "mrr"),
    # the three above hold every task, both GPU counts and three reductions (allreduce runs on lazy in
    # tests/layouts/test_lazy_device.py, decoupled_async); the rest of the matrix is slow (make test-slow)
    pytest.param(("cartpole", 1, "allreduce"), marks=pytest.mark.slow),
    pytest.param(("ant", 2, "har"), marks=pytest.mark.slow),
    pytest.param(("cartpole", 2, "mpr"), marks=pytest.mark.slow),
    pytest.param(("ant", 2, "allreduce"), marks=pytest.mark.slow),
    pytest.param(("mjlab", 2, "mrr"), marks=pytest.mark.slow),  # 4 mjlab imports (~10 s each)
]


def case_id(case: tuple[str, int, str]) -> str:
    task, gpus, reduction = case
    return f"{task}-{gpus}gpu-{reduction}"


@pytest.fixture(scope="module", params=CASES, ids=case_id)
def lazy_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Plan, dict]:
    """One run per case: its run dir, plan and summary (the plan names the reduction it was asked for)."""
    task, gpus, reduction = request.param
    if task == "mjlab":
        pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")
    run_dir = tmp_path_factory.mktemp(case_id(request.param)) / "run"
    r = run_cli(*SMALL, *TASKS[task], *(ONE_GPU if gpus == 1 else TWO_GPUS), f"reduction={reduction}",
                f"hydra.run.dir={run_dir}", timeout=600)
    left = gmiexp_workers(run_dir)
    for p in left:
        p.kill()
    assert not left, f"orphan GMI workers left behind: {[p.pid for p in left]}"
    assert r.returncode == 0, r.stderr[-3000:]
    return run_dir, Plan.load(run_dir / "plan.yaml"), json.loads((run_dir / "summary.json").read_text())


def test_the_plan_ran_on_lazy_with_its_reduction(lazy_run: tuple[Path, Plan, dict]) -> None:
    run_dir, plan, s = lazy_run
    assert plan.train.device == "lazy" and plan.layout == "tcg_ex" and s["status"] == "ok"
    assert plan.world_size == 2 * len(plan.devices) and set(s["gmis"]) == {str(g.id) for g in plan.gmis}
    assert f"reduction={plan.reduction} requested" in plan.reduction_reason


def test_every_gmi_ends_every_epoch_with_the_same_weights(lazy_run: tuple[Path, Plan, dict]) -> None:
    run_dir, plan, _s = lazy_run
    digests = {g.id: [r["sync/digest"] for r in read_history(run_dir, g.id)] for g in plan.gmis}
    first = digests[0]
    assert len(first) == 2 and len(set(first)) == 2  # two epochs, and the weights moved in each
    assert all(d == first for d in digests.values()), digests


def test_frames_are_counted_over_every_gmi(lazy_run: tuple[Path, Plan, dict]) -> None:
    run_dir, plan, s = lazy_run
    assert s["history"][-1]["frames"] == 2 * plan.world_size * 8 * 8  # epochs x GMIs x envs x horizon
    assert all(s["gmis"][str(g.id)]["epochs"] == 2 for g in plan.gmis)  # every GMI stopped with GMI 0


def test_the_central_value_net_trains_in_every_gmi(lazy_run: tuple[Path, Plan, dict]) -> None:
    run_dir, plan, _s = lazy_run
    if not plan.task.central_value:
        pytest.skip("no central value net in this task")
    logs = "".join(p.read_text() for p in (run_dir / "logs").rglob("stdout.log"))
    assert logs.count("Adding Central Value Network") == plan.world_size
