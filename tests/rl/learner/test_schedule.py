"""The learning rate follows ``train.lr_schedule`` (rl-games' rules) and stays identical on every trainer.

The old experience trainer (rl/trainer.py before the learner) kept the rate constant whatever the
schedule said; these tests fail on it.
"""

from __future__ import annotations

import threading

import pytest
import torch
from coin_policy import ACTIONS, Coin, rollout

from gmiexp.comm.reduction.collective import LocalWorld
from gmiexp.config import TrainConfig
from gmiexp.errors import ConfigError
from gmiexp.rl.learner.schedule import make_schedule
from gmiexp.rl.learner.update import Learner, make_optimiser

LR0 = 1e-3


def learner(schedule: str, kl_threshold: float = 0.008, mini_epochs: int = 2, max_frames: int = 8,
            reduce_sum=lambda t: t, world: int = 1, leader: bool = True, ppo: bool = True) -> Learner:
    train = TrainConfig(horizon_length=1, mini_epochs=mini_epochs, learning_rate=LR0, lr_schedule=schedule,
                        kl_threshold=kl_threshold)
    model = Coin()
    return Learner(model, make_optimiser(model, train), train, reduce_sum, ppo=ppo, num_minibatches=1, world=world,
                   leader=leader, device=torch.device("cpu"), seed=0, max_frames=max_frames)


def lrs(u: Learner) -> set[float]:
    return {g["lr"] for g in u.opt.param_groups}


def test_adaptive_raises_the_rate_while_the_kl_is_small_and_lowers_it_when_large() -> None:
    calm = learner("adaptive", kl_threshold=1e3)  # KL far below threshold / 2: x1.5 per mini-epoch
    calm.step([(len(ACTIONS), rollout())], done=True)
    assert calm.lr == pytest.approx(LR0 * 1.5 ** 2) and lrs(calm) == {calm.lr}
    wild = learner("adaptive", kl_threshold=1e-6)  # behaviour policy far from the current one: / 1.5
    wild.step([(len(ACTIONS), rollout())], done=True)
    assert wild.lr == pytest.approx(LR0 / 1.5 ** 2) and lrs(wild) == {wild.lr}


def test_adaptive_a2c_reads_how_far_its_one_step_moved_the_policy() -> None:
    """A2C's KL is measured after its step (against the policy before it), not against the behaviour policy."""
    on_policy = rollout()
    on_policy["neglogp"].fill_(-torch.log(torch.tensor(0.5)).item())  # behaviour = current: 0 before the step
    moved = learner("adaptive", kl_threshold=1e-12, ppo=False)
    moved.step([(len(ACTIONS), on_policy)], done=True)
    assert moved.last_kl > 2e-12 and moved.lr == pytest.approx(LR0 / 1.5)
    calm = learner("adaptive", kl_threshold=1.0, ppo=False)
    calm.step([(len(ACTIONS), rollout())], done=True)  # far-off behaviour policy, but a tiny step
    assert calm.lr == pytest.approx(LR0 * 1.5) and lrs(calm) == {calm.lr}


def test_linear_decays_with_the_frames_the_group_trained() -> None:
    u = learner("linear", max_frames=8)
    u.step([(len(ACTIONS), rollout())], done=False)  # 4 of 8 rows: half way
    assert u.lr == pytest.approx(1e-6 + (LR0 - 1e-6) * 0.5) and lrs(u) == {u.lr}
    u.step([(len(ACTIONS), rollout())], done=True)
    assert u.lr == pytest.approx(1e-6)


def test_identity_keeps_the_rate_and_replay_does_not_move_it() -> None:
    u = learner("identity")
    u.step([(len(ACTIONS), rollout())], done=True)
    assert u.lr == LR0 and lrs(u) == {LR0}
    a = learner("adaptive", kl_threshold=1e-6)
    a.step([(len(ACTIONS), rollout())], done=True, off_policy=True)
    assert a.lr == LR0


def test_unknown_schedule_is_refused() -> None:
    with pytest.raises(ConfigError, match="invalid train.lr_schedule: 'cosine'"):
        make_schedule(TrainConfig(lr_schedule="cosine"), 1)


def test_two_trainers_set_the_same_adaptive_rate_from_the_group_kl() -> None:
    """Trainer 0 sees a far-off behaviour policy, trainer 1 its own: the group's mean KL decides for both."""
    world = LocalWorld(2, timeout_s=30)
    cols = [world.collective(r) for r in range(2)]
    # threshold between the two trainers' own KLs: alone, 0 would lower the rate and 1 raise it
    on_policy = rollout()
    on_policy["neglogp"] = torch.full_like(on_policy["neglogp"], -torch.log(torch.tensor(0.5)).item())
    mine = [rollout(), on_policy]
    kl0 = learner("identity", mini_epochs=1)
    kl0.step([(len(ACTIONS), rollout())], done=True)
    threshold = kl0.last_kl / 2.5  # group mean = kl0 / 2 = 1.25 thr (trainer 1's KL is 0): inside [thr / 2, 2 thr]
    learners = [learner("adaptive", kl_threshold=threshold, mini_epochs=1, world=2, leader=r == 0,
                        reduce_sum=lambda t, c=cols[r]: c.all_reduce(t.view(-1), [0, 1])) for r in range(2)]
    errors: list[BaseException] = []

    def run(r: int) -> None:
        try:
            learners[r].step([(len(ACTIONS), mine[r])], done=True)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert learners[0].last_kl == pytest.approx(kl0.last_kl / 2, rel=1e-4) == learners[1].last_kl
    assert learners[0].lr == learners[1].lr == LR0  # between the bounds: unchanged on both
    assert all(torch.equal(a, b) for a, b in zip(learners[0].model.parameters(), learners[1].model.parameters(),
                                                 strict=True))
