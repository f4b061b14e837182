"""Every layout runs the mjlab Cartpole (MuJoCo Warp on CPU) with 2 GMIs; PPO learns it.

mjlab's import (~10 s per GMI) and first steps dominate these runs; all but tcg_ex are ``slow``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gmitest import run_cli

from gmiexp.plan import Plan
from gmiexp.status import read_history

pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")

MJLAB = ["task=MjlabCartpole", "num_envs=16", "launch.progress=false", "train.horizon_length=8",
         "train.minibatch_size=128", "train.mini_epochs=2", "num_gpus=1", "gmis_per_gpu=2"]


def run(tmp_path: Path, *extra: str, iters: int = 3, timeout: float = 400) -> tuple[dict, Plan]:
    run_dir = tmp_path / "run"
    r = run_cli(*MJLAB, f"max_iterations={iters}", *extra, f"hydra.run.dir={run_dir}", timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("\n") == 1 and r.stdout.startswith("gmiexp ok"), r.stdout  # only the summary line
    return json.loads((run_dir / "summary.json").read_text()), Plan.load(run_dir / "plan.yaml")


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_tcg_ex_trains_with_the_central_value_net_in_sync(tmp_path: Path, no_orphans: None) -> None:
    s, plan = run(tmp_path, "layout=tcg_ex", "train.check_sync=true")
    assert plan.world_size == 2 and s["status"] == "ok"
    assert all(g["epochs"] == 3 for g in s["gmis"].values())
    assert s["gmis"]["0"]["frames_local"] == 3 * 8 * 16  # every GMI stepped its own mjlab envs
    logs = "".join(p.read_text() for p in (tmp_path / "run" / "logs").rglob("stdout.log"))
    assert logs.count("Adding Central Value Network") == 2  # critic group -> rl-games' central value net


@pytest.mark.slow
@pytest.mark.parametrize(("layout", "extra"), [
    ("tcg", []),
    ("tdg", []),
    ("tdg_ex", ["layout.trainers_per_gpu=1"]),
    ("decoupled_async", ["async_train.max_policy_lag=100"]),
])
def test_every_layout_runs_mjlab(layout: str, extra: list[str], tmp_path: Path, no_orphans: None) -> None:
    s, plan = run(tmp_path, f"layout={layout}", *extra)
    assert s["status"] == "ok" and len([g for g in plan.gmis if g.roles != ["trainer"]]) == 2  # + trainer GMIs
    sims = [g for g in plan.gmis if g.has("simulator")]
    assert sum(s["gmis"][str(g.id)]["frames_local"] for g in sims) > 0
    if plan.trainer_group:
        assert all(s["gmis"][str(t)]["train_samples"] > 0 for t in plan.trainer_group)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_ppo_learns_mjlab_cartpole(tmp_path: Path, no_orphans: None) -> None:
    # 25-step episodes (1.25 s): the pole starts upright and the return measures how long it stays up
    # (at most ~1.25); a random policy gets ~0.6. With 200-step episodes 300k env steps barely move it.
    iters = 30
    s, _plan = run(tmp_path, "layout=tcg_ex", "num_envs=256", "train.horizon_length=16", "train.minibatch_size=2048",
                   "train.mini_epochs=4", "task.max_episode_length=25", iters=iters, timeout=1200)
    rewards = [r["reward/mean"] for r in read_history(Path(s["run_dir"]), 0) if r.get("reward/mean") is not None]
    early, late = rewards[:3], rewards[-3:]
    assert len(rewards) >= 10 and sum(late) / 3 > sum(early) / 3 + 0.25, rewards


LAZY_CASES = {
    "tcg_ex": ["layout=tcg_ex", "gmis_per_gpu=1"],  # rl-games' PPO and its central value net (one GMI on lazy)
    "tcg": ["layout=tcg"],
    "tdg_ex": ["layout=tdg_ex", "layout.trainers_per_gpu=1", "async_train.max_policy_lag=100"],
}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", list(LAZY_CASES))
def test_mjlab_with_the_model_on_the_lazy_stand_in(case: str, tmp_path: Path, no_orphans: None) -> None:
    """mjlab steps on the host, the model lives on ``lazy``: a tensor handed over on the wrong device fails."""
    s, _plan = run(tmp_path, "train.device=lazy", *LAZY_CASES[case], iters=2, timeout=600)
    assert s["status"] == "ok"


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["tcg_ex", "tcg", "tdg_ex"])
def test_mjlab_on_cuda(layout: str, tmp_path: Path, no_orphans: None) -> None:
    """On a GPU host mjlab steps on each GMI's GPU (``pytest -m gpu``)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    extra = ["layout.trainers_per_gpu=1"] if layout == "tdg_ex" else []
    s, _plan = run(tmp_path, "train.device=cuda", f"layout={layout}", *extra)
    assert s["status"] == "ok"
