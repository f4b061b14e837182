"""rsl_rl's normalisers in a group: updated on every GMI's rows, they move as one process's on the whole batch."""

from __future__ import annotations

import copy
import threading

import torch
from reduction_helpers import ThreadSum
from rsl_rl.extensions import RandomNetworkDistillation
from rsl_rl.models import MLPModel
from rsl_rl.modules import EmpiricalNormalization
from tensordict import TensorDict

from gmiexp.rl.rslrl.sync import GroupNormalization, StepMoments, group_normalisers


def test_g_gmis_normalisers_move_as_one_process_s() -> None:
    """Observation (2-D) and reward (shape []) normalisers, uneven shares, several steps, ``until`` reached."""
    g = torch.Generator().manual_seed(0)
    steps = [torch.randn(10, 3, generator=g) * 3 + 5 for _ in range(5)]
    rewards = [torch.rand(10, generator=g) * 4 for _ in range(5)]
    cuts = [slice(0, 3), slice(3, 10)]
    one, one_r = EmpiricalNormalization(3, until=35), EmpiricalNormalization([])
    for x, r in zip(steps, rewards, strict=True):
        one.update(x)
        one_r.update(r)
    red, out = ThreadSum(len(cuts)), [None] * len(cuts)

    calls = [0, 0]

    def gmi(rank: int) -> None:
        reduce = red.for_rank(rank)

        def counted(t: torch.Tensor) -> None:
            calls[rank] += 1
            reduce(t)

        step = StepMoments(counted)
        mine = GroupNormalization(EmpiricalNormalization(3, until=35), step)
        mine_r = GroupNormalization(EmpiricalNormalization([]), step)
        for x, r in zip(steps, rewards, strict=True):
            mine.update(x[cuts[rank]])
            mine_r.update(r[cuts[rank]])
            step.flush()  # both updates in one collective
        out[rank] = (mine.state_dict(), mine_r.state_dict())

    threads = [threading.Thread(target=gmi, args=(r,)) for r in range(len(cuts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert int(one.count) == 40  # `until` stopped the fifth step, in one process as in the group
    assert calls == [5, 5]  # one collective per step
    for ref, got in zip((one.state_dict(), one_r.state_dict()), zip(*out, strict=True), strict=True):
        for k in ref:
            assert torch.equal(got[0][k], got[1][k]), k  # the same bits on every GMI
            torch.testing.assert_close(got[0][k], ref[k], rtol=1e-6, atol=1e-6)


def test_every_normaliser_is_swapped_and_a_copy_is_rsl_rl_s_own() -> None:
    """Actor's, critic's, RND's state and reward normalisers; exports (deepcopy) get rsl_rl's class back."""
    obs = TensorDict({"policy": torch.zeros(4, 3)}, batch_size=[4])
    groups = {"actor": ["policy"], "critic": ["policy"], "rnd_state": ["policy"]}
    actor = MLPModel(obs, groups, "actor", 1, hidden_dims=[8], obs_normalization=True)
    rnd = RandomNetworkDistillation(3, groups, 2, [4], [4], state_normalization=True, reward_normalization=True)
    keys = {m: sorted(m.state_dict()) for m in (actor, rnd)}
    step = StepMoments(lambda t: None)
    swapped = group_normalisers([actor, rnd], step)
    assert swapped == ["0.obs_normalizer", "1.state_normalizer", "1.reward_normalizer.emp_norm"]
    assert [actor.obs_normalizer.immediate, rnd.reward_normalizer.emp_norm.immediate] == [False, True]
    assert all(sorted(m.state_dict()) == k for m, k in keys.items())  # checkpoints load either way
    assert group_normalisers([actor, rnd], step) == []  # swapping twice changes nothing
    exported = copy.deepcopy(actor.obs_normalizer)
    assert type(exported) is EmpiricalNormalization
    assert all(torch.equal(a, b) for a, b in zip(exported.state_dict().values(),
                                                 actor.obs_normalizer.state_dict().values(), strict=True))
