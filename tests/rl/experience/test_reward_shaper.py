"""The experience agents shape rewards with rl-games' own shaper, as tcg_ex's agent does (not the scale alone)."""

from __future__ import annotations

import torch
from gmitest import compose_config

from gmiexp.rl.experience.agent_loop import reward_shaper


def test_pong_rewards_are_clipped_and_walker_rewards_logged_as_in_tcg_ex() -> None:
    r = torch.tensor([-3.0, 0.0, 0.5, 4.0])
    assert torch.equal(reward_shaper(compose_config("task=Pong").task)(r), torch.tensor([-1.0, 0.0, 0.5, 1.0]))
    walker = compose_config("task=WalkerWalk").task  # shift 1, log: log(r + 1), as rl-games' walker_walk.yaml
    assert torch.allclose(reward_shaper(walker)(r.clamp(min=0)), torch.log(r.clamp(min=0) + 1))

def test_a_task_without_shaper_keeps_the_scale() -> None:
    task = compose_config("task=Cartpole").task
    assert torch.equal(reward_shaper(task)(torch.tensor([1.0, -2.0])), torch.tensor([1.0, -2.0]) * task.reward_scale)
