"""The experience trainers' checkpoints carry the learning-rate schedule: a resume goes on with the rate it reached.

rl-games' checkpoint restores Adam but not the rate its adaptive schedule reached; tcg_ex keeps it beside
rl-games' keys (:data:`gmiexp.rl.rlgames.checkpoint.SCHEDULE_KEY`). The experience trainers restored the
configured ``train.learning_rate`` instead, so every resume, requeue and re-shape of tdg_ex or decoupled async
began the adaptive schedule again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from coin_policy import ACTIONS, Coin, rollout
from gmitest import gmiexp_workers, run_cli

from gmiexp.config import TrainConfig
from gmiexp.plan import Plan
from gmiexp.rl.learner.update import Learner
from gmiexp.rl.rlgames import checkpoint

LR0 = 1e-5
#: the KL stays far below half this threshold, so rl-games' adaptive rule multiplies the rate by 1.5 at every move
KL_THRESHOLD = 1000.0


def learner(lr: float = LR0) -> Learner:
    train = TrainConfig(horizon_length=1, mini_epochs=1, learning_rate=lr, lr_schedule="adaptive",
                        kl_threshold=KL_THRESHOLD)
    model = Coin()
    return Learner(model, torch.optim.Adam(model.parameters(), lr=lr), train, lambda t: t, ppo=True,
                   num_minibatches=1, world=1, leader=True, device=torch.device("cpu"), seed=0, max_frames=4)


def test_the_learner_goes_on_with_the_rate_its_checkpoint_holds(tmp_path: Path) -> None:
    before = learner()
    before.step([(len(ACTIONS), rollout())], done=False)
    assert before.lr == pytest.approx(LR0 * 1.5)
    pth = checkpoint.save(tmp_path / "ck", before.model, before.opt, 1, 4, before.schedule_state())
    after = learner()
    state = checkpoint.load(str(pth))
    checkpoint.restore(after.model, state, after.opt)
    after.restore_schedule(state)
    assert after.lr == before.lr and after.opt.param_groups[0]["lr"] == before.lr
    after.step([(len(ACTIONS), rollout())], done=False)
    assert after.lr == pytest.approx(LR0 * 1.5 ** 2)  # as one uninterrupted run
    older = learner(3e-4)
    older.restore_schedule({"model": state["model"]})  # rl-games' own checkpoint, or an older gmiexp's
    assert older.lr == 3e-4


def last_lr(run_dir: Path) -> tuple[float, dict]:
    summary = json.loads((run_dir / "summary.json").read_text())
    trainer = next(g for g in summary["gmis"].values() if g.get("checkpoint"))
    state = torch.load(trainer["checkpoint"], weights_only=False)
    return state[checkpoint.SCHEDULE_KEY]["last_lr"], trainer


def args(layout: str) -> list[str]:
    """One move of the rate per update: every update's rows in one minibatch, one mini-epoch."""
    out = [f"layout={layout}", "task=Cartpole", "num_envs=8", "train.horizon_length=8", "train.minibatch_size=128",
           "train.mini_epochs=1", f"train.learning_rate={LR0}", "train.lr_schedule=adaptive",
           f"train.kl_threshold={KL_THRESHOLD}", "launch.progress=false"]
    if layout == "decoupled_async":
        out += ["async_train.algo=ppo", "async_train.max_policy_lag=100"]
    return out


#: what test_tdg_ex_trains_rl_games_update_with_periodic_checkpoints_and_sync_checks reads of the first run: a
#: checkpoint every epoch, the trainers' sync check, an rl-games optimizer key (neither moves the adaptive rate)
CHECKPOINTS = ["train.save_frequency=1", "train.check_sync=true", "++train.rlgames_config.weight_decay=0.001"]


def first_run(layout: str, run_dir: Path, *extra: str) -> None:
    r = run_cli(*args(layout), *extra, "max_iterations=2", f"hydra.run.dir={run_dir}", timeout=240)
    left = gmiexp_workers(run_dir)
    for p in left:
        p.kill()
    assert not left, f"orphan GMI workers left behind: {[p.pid for p in left]}"
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.fixture(scope="module")
def tdg_ex_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One 2-epoch tdg_ex run read by both tests below (one launch of ~11 s of CPU instead of two)."""
    run_dir = tmp_path_factory.mktemp("tdg_ex") / "run"
    first_run("tdg_ex", run_dir, *CHECKPOINTS)
    return run_dir


def test_tdg_ex_trains_rl_games_update_with_periodic_checkpoints_and_sync_checks(tdg_ex_run: Path) -> None:
    """A tiny tdg_ex run on rl-games' agent: every step trains, rl-games' keys apply, checkpoints resume anywhere.

    (Moved here from test_fed_update.py to share its run with the resume below.)"""
    run_dir = tdg_ex_run
    s = json.loads((run_dir / "summary.json").read_text())
    plan = Plan.load(run_dir / "plan.yaml")
    trainer = s["gmis"][str(plan.trainer_group[0])]
    agents = [g for g in plan.gmis if g.has("agent")]
    assert trainer["updates"] == 2 and trainer["seq_errors"] == 0
    assert trainer["train_samples"] == 2 * 8 * sum(g.num_envs for g in agents)  # all horizon_length steps
    nn_dir = run_dir / "rl_games" / "run" / "nn"
    assert {p.name for p in nn_dir.glob("last_*.pth")} == {"last_Cartpole_ep_1.pth", "last_Cartpole_ep_2.pth"}
    saved = torch.load(nn_dir / "last_Cartpole_ep_2.pth", weights_only=False)
    assert saved["epoch"] == 2 and saved["optimizer"]["param_groups"][0]["weight_decay"] == 0.001


@pytest.mark.parametrize("layout", ["tdg_ex", pytest.param("decoupled_async", marks=pytest.mark.slow)])
def test_a_resumed_experience_run_goes_on_with_the_adaptive_rate(layout: str, tmp_path: Path, no_orphans: None,
                                                                 request: pytest.FixtureRequest) -> None:
    """One move of the rate per update (one minibatch, one mini-epoch): after u1 + u2 updates over a resume the
    rate is LR0 x 1.5^(u1 + u2), as without the restart; restoring the configured rate gave LR0 x 1.5^u2."""
    if layout == "tdg_ex":
        first = request.getfixturevalue("tdg_ex_run")  # the module's shared first run
    else:
        first = tmp_path / "a"
        first_run(layout, first)
    second = tmp_path / "b"
    lr1, t1 = last_lr(first)
    assert lr1 == pytest.approx(LR0 * 1.5 ** t1["updates"])
    r = run_cli(*args(layout), "max_iterations=1", f"checkpoint={t1['checkpoint']}", f"hydra.run.dir={second}",
                timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    lr2, t2 = last_lr(second)
    assert t2["resumed_epoch"] == t1["epoch"]
    assert lr2 == pytest.approx(LR0 * 1.5 ** (t1["updates"] + t2["updates"]))
