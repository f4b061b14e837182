"""checkpoint= resumes the experience layouts too: weights, normalisers, Adam state and counters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from gmitest import FAST, run_cli

from gmiexp.rl.state import state_digest


def run(run_dir: Path, *extra: str) -> dict:
    r = run_cli(*FAST, "gmis_per_gpu=1", "async_train.max_policy_lag=100", f"hydra.run.dir={run_dir}", *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((run_dir / "summary.json").read_text())
    (trainer,) = [g for g in s["gmis"].values() if "updates" in g]
    return trainer


def adam_steps(path: str) -> float:
    state = torch.load(path, weights_only=False)
    return float(state["optimizer"]["state"][0]["step"])


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_experience_layouts_resume_weights_optimiser_and_counters(tmp_path: Path, no_orphans: None) -> None:
    first = run(tmp_path / "a", "layout=tdg_ex", "max_iterations=2")
    ckpt = first["checkpoint"]
    saved = torch.load(ckpt, weights_only=False)
    assert state_digest(saved["model"]) == first["weights_digest"]  # the trained weights, normalisers included
    assert (saved["epoch"], saved["frame"]) == (2, 2 * 16 * 32)

    again = run(tmp_path / "b", "layout=tdg_ex", "max_iterations=1", f"checkpoint={ckpt}")
    assert again["start_digest"] == first["weights_digest"]  # it started from the checkpoint, not from scratch
    assert (again["resumed_epoch"], again["epoch"], again["frame"]) == (2, 3, 3 * 16 * 32)
    # rl-games' agent (one tdg_ex trainer): 2 mini-epochs x 2 minibatches (512 rows of 256) per update
    assert adam_steps(again["checkpoint"]) == adam_steps(ckpt) + again["updates"] * 4

    other = run(tmp_path / "c", "layout=decoupled_async", "num_gpus=2", "max_iterations=1", f"checkpoint={ckpt}")
    assert other["start_digest"] == first["weights_digest"] and other["resumed_epoch"] == 2


def test_episode_means_go_into_the_checkpoint_and_come_back_after_a_restart() -> None:
    """rl-games does not save its episode meters: after a restart the reported return began again from nothing."""
    from types import SimpleNamespace

    from rl_games.algos_torch.torch_ext import AverageMeter

    from gmiexp.rl.rlgames.checkpoint import EPISODES_KEY, episode_meters, restore_episode_meters

    def agent() -> SimpleNamespace:
        return SimpleNamespace(game_rewards=AverageMeter(1, 100), game_shaped_rewards=AverageMeter(1, 100),
                               game_lengths=AverageMeter(1, 100))

    before = agent()
    before.game_rewards.update(torch.tensor([[10.0], [20.0], [60.0]]))
    before.game_shaped_rewards.update(torch.tensor([[1.0]]))
    before.game_lengths.update(torch.tensor([[5.0], [7.0]]))
    state = {EPISODES_KEY: episode_meters(before)}
    after = agent()
    restore_episode_meters(after, state)
    assert after.game_rewards.current_size == 3 and float(after.game_rewards.get_mean()) == 30.0
    assert after.game_shaped_rewards.current_size == 1 and after.game_lengths.current_size == 2
    after.game_rewards.update(torch.tensor([[70.0]]))  # goes on as one meter: (3 x 30 + 70) / 4
    assert float(after.game_rewards.get_mean()) == 40.0
    other = SimpleNamespace(game_rewards=AverageMeter(2, 100))  # another task (two values): left alone
    restore_episode_meters(other, state)
    assert other.game_rewards.current_size == 0
    restore_episode_meters(agent(), {})  # an rl-games checkpoint without them: nothing to restore


def test_the_learning_rate_goes_on_after_a_restart() -> None:
    """rl-games restores Adam but not its ``last_lr``: a re-shaped run's adaptive schedule began again from
    ``learning_rate`` at every re-shape (an elastic Ant run on 0.00045-0.001 where its fixed peers were on 0.001)."""
    from types import SimpleNamespace

    from gmiexp.rl.rlgames.checkpoint import SCHEDULE_KEY, restore_schedule, schedule_state

    model = torch.nn.Linear(2, 2)
    before = SimpleNamespace(last_lr=0.0023, entropy_coef=0.001)
    state = {SCHEDULE_KEY: schedule_state(before)}
    after = SimpleNamespace(last_lr=3e-4, entropy_coef=0.0, optimizer=torch.optim.Adam(model.parameters(), 3e-4))
    restore_schedule(after, state)
    assert (after.last_lr, after.entropy_coef) == (0.0023, 0.001)
    assert after.optimizer.param_groups[0]["lr"] == 0.0023
    fresh = SimpleNamespace(last_lr=3e-4, entropy_coef=0.0, optimizer=after.optimizer)
    restore_schedule(fresh, {})  # an rl-games checkpoint without it: the config's rate
    assert fresh.last_lr == 3e-4


def test_a_copy_for_another_run_keeps_the_learning_and_none_of_the_writer_s_streams() -> None:
    """A PBT member that copies its leader draws its own streams: the leader's generators and episodes stay behind."""
    from types import SimpleNamespace

    from gmiexp.rl.rlgames.checkpoint import RUN_KEY, SCHEDULE_KEY, for_another_run, restore_schedule, run_segment
    from gmiexp.rl.rlgames.runstate import resume

    writer = {"gmi": 0, "generators": {"torch": torch.get_rng_state()}, "env": None, "in_progress": 3}
    state = {"model": {"w": torch.ones(2)}, "optimizer": {"lr": 1e-3}, "epoch": 4,
             RUN_KEY: {"segment": 2, "world_size": 1, "gmis": [writer]}}
    copy = for_another_run(state)
    assert copy[RUN_KEY] == {"segment": 2} and run_segment(copy) == 3  # the start is the next segment
    assert copy["model"] is state["model"] and copy["epoch"] == 4 and state[RUN_KEY]["gmis"] == [writer]
    fresh = SimpleNamespace(global_rank=0, world_size=1, current_lengths=torch.zeros(2))
    assert resume(fresh, copy[RUN_KEY], 0, 1)["restored"] is False  # nothing of the writer's run is restored
    assert for_another_run({"model": {}}) == {"model": {}}  # rl-games' own checkpoint: nothing to leave behind
    # the schedule goes on, but for a value the new run changed: a mutated learning rate is not overridden
    state[SCHEDULE_KEY] = {"last_lr": 4e-4, "entropy_coef": 0.01}
    opt = torch.optim.Adam([torch.nn.Parameter(torch.ones(1))], lr=5e-3)
    member = SimpleNamespace(last_lr=5e-3, entropy_coef=0.02, optimizer=opt)
    restore_schedule(member, for_another_run(state, ["learning_rate", "gamma"]))
    assert (member.last_lr, member.entropy_coef) == (5e-3, 0.01) and opt.param_groups[0]["lr"] == 5e-3
    restore_schedule(member, for_another_run(state))
    assert (member.last_lr, opt.param_groups[0]["lr"]) == (4e-4, 4e-4)  # an unchanged rate: the source's schedule
