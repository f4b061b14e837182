"""What a checkpoint holds of the run beside the model, and what a start from it restores or says it cut."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from rl_games.algos_torch.torch_ext import AverageMeter

from gmiexp.rl.infos import InfoMeter
from gmiexp.rl.rlgames.checkpoint import EPISODE_METERS, EPISODES_KEY, episode_meters, restore_episode_meters
from gmiexp.rl.rlgames.episodes import RunWideMeter
from gmiexp.rl.rlgames.runstate import generator_states, gmi_record, resume, resume_line, set_generator_states


def draws() -> tuple[float, float, float]:
    return float(torch.rand(1)), float(np.random.rand()), random.random()


def test_the_generators_go_on_where_they_were() -> None:
    saved = generator_states("cpu")
    want = draws()
    torch.manual_seed(123), np.random.seed(123), random.seed(123)
    set_generator_states(saved, "cpu")
    assert draws() == want


class Pool:
    """A simulator that cannot save its state (envpool's case)."""

    def get_env_state(self) -> None:
        return None

    def set_env_state(self, env_state: Any) -> None:
        raise AssertionError("nothing to set")


def agent(rank: int, in_progress: int, n: int = 4, env: Any = None) -> SimpleNamespace:
    lengths = torch.zeros(n)
    lengths[:in_progress] = 5.0
    return SimpleNamespace(global_rank=rank, world_size=2, horizon_length=4, minibatch_size=4 * n,
                           ppo_device=torch.device("cpu"), obs={"obs": torch.randn(n, 3)},
                           dones=torch.zeros(n, dtype=torch.uint8), current_rewards=torch.ones(n, 1),
                           current_shaped_rewards=torch.ones(n, 1), current_lengths=lengths, is_rnn=False,
                           vec_env=env or Pool(), algo_observer=SimpleNamespace(info=InfoMeter("log.level", rank)),
                           **{name: RunWideMeter(1, 10, None) for name in EPISODE_METERS})


def test_a_simulator_that_cannot_save_its_state_cuts_the_episodes_in_progress_and_says_how_many() -> None:
    run = {"segment": 0, "world_size": 2, "gmis": [gmi_record(agent(0, 3)), gmi_record(agent(1, 2))]}
    want = draws()
    fresh = agent(1, 0)
    report = resume(fresh, run, rank=1, world_size=2)
    assert report == {"restored": True, "simulator": False, "episodes_cut": 5, "frames_cut": 5 * 5}
    assert draws() == want  # the streams go on from where GMI 1 recorded them
    assert int(fresh.current_lengths.sum()) == 0  # the fresh episodes: nothing carried into them
    line = resume_line(report, epoch=10, segment=1)
    assert "5 episodes in progress were cut (25 frames; " in line and "segment 1's seeds" in line


def test_records_of_another_partition_are_no_gmi_s_own() -> None:
    """runstate restores a GMI's own record only; a re-shape carries what it can (test_carry.py)."""
    run = {"segment": 1, "world_size": 2, "gmis": [gmi_record(agent(0, 3)), gmi_record(agent(1, 4))]}
    report = resume(agent(0, 0, n=8), run, rank=0, world_size=1)  # re-shaped 2 -> 1
    assert report == {"restored": False, "simulator": False, "episodes_cut": 7, "frames_cut": 35}
    assert resume(agent(0, 0), None, 0, 1)["episodes_cut"] is None  # a checkpoint that does not say: unknown


def test_a_return_window_comes_back_in_the_shape_rl_games_left_it() -> None:
    """rl-games' return meter turns ``(1,)`` into ``(1, 1)`` at its first update (it indexes its running sums with
    ``nonzero``'s column): a restart compared the shapes and left the return window empty."""
    before = SimpleNamespace(**{name: AverageMeter(1, 100) for name in EPISODE_METERS})
    sums, done = torch.tensor([[10.0], [20.0], [60.0]]), torch.tensor([[0], [2]])
    before.game_rewards.update(sums[done])  # as rl-games' play_steps does: values of shape (k, 1, 1)
    assert tuple(before.game_rewards.mean.shape) == (1, 1)
    after = SimpleNamespace(**{name: AverageMeter(1, 100) for name in EPISODE_METERS})
    restore_episode_meters(after, {EPISODES_KEY: episode_meters(before)})
    assert after.game_rewards.current_size == 2 and torch.equal(after.game_rewards.mean, before.game_rewards.mean)


def test_the_info_keys_last_value_goes_on_where_an_epoch_reports_none() -> None:
    """Episode logs come only at resets: an epoch without one repeats the last value, after a resume as before it."""
    saving = agent(1, 0)
    saving.algo_observer.info.step({"log": {"level": 3.0}})
    assert saving.algo_observer.info.epoch_value(5) == 3.0
    run = {"segment": 0, "world_size": 2, "gmis": [gmi_record(agent(0, 0)), gmi_record(saving)]}
    fresh = agent(1, 0)
    resume(fresh, run, rank=1, world_size=2)
    assert fresh.algo_observer.info.epoch_value(6) == 3.0  # was None: the value was not in the checkpoint
    other = agent(0, 0, n=8)
    resume(other, run, rank=0, world_size=1)  # another partition: no GMI's own value
    assert other.algo_observer.info.epoch_value(6) is None
