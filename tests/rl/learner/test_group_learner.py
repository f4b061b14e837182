"""The experience layouts' learner: G trainers fed one batch make the update one trainer makes on all its rows.

With several minibatches, mini-epochs, rl-games' input and value normalisers and the adaptive rate: every trainer
draws the same permutation of the group's rows and trains its own rows of each minibatch, and the normalisers step
on the group's moments where one trainer steps them (``gmiexp.rl.rlgames.sync.GroupRunningMeanStd``). Before,
each trainer permuted its own rows and its normalisers moved on them until a merge after the round: 2 trainers
ended 0.05-0.1 from one (the weights moved about as much).
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from gmitest import compose_config
from reduction_helpers import ThreadSum

from gmiexp.planner.build import build_plan
from gmiexp.rl.learner.update import Learner, make_optimiser
from gmiexp.rl.rlgames.policy import Policy, Spaces, build_model
from gmiexp.rl.rlgames.states import FIELD, StateLayout

HORIZON, SEQ, N, AGENTS, ROUNDS = 9, 4, 4, 4, 3  # records per rollout (8 steps), envs per agent
KINDS: dict[str, tuple[dict[str, Any], Spaces]] = {
    "continuous": ({}, Spaces((5,), True, 2)),
    "discrete": ({}, Spaces((5,), False, 3)),
    "gru": ({"rnn": {"name": "gru", "units": 8, "layers": 1, "before_mlp": False}}, Spaces((5,), False, 2)),
}


def make(tmp_path: Path, kind: str) -> tuple[Any, torch.nn.Module, Spaces]:
    cfg = compose_config("layout=tdg_ex", "task=Cartpole", "gmis_per_gpu=1", f"num_envs={N}", "train.device=cpu",
                         f"train.horizon_length={HORIZON - 1}", f"train.seq_length={SEQ}", "train.mini_epochs=2",
                         "train.lr_schedule=adaptive", "train.kl_threshold=0.008", "train.learning_rate=0.01",
                         "train.normalize_input=true", "train.normalize_value=true",
                         "train.normalize_advantage=true", "train.truncate_grads=true", "train.entropy_coef=0.01")
    plan, _ = build_plan(cfg, tmp_path)
    plan.task.mlp_units = [16]
    task, spaces = KINDS[kind]
    for k, v in task.items():
        setattr(plan.task, k, v)
    return plan, build_model(plan, plan.gmi(plan.trainer_group[0]), spaces, torch.device("cpu")), spaces


def rollouts(model: torch.nn.Module, spaces: Spaces, seed: int) -> list[dict[str, torch.Tensor]]:
    """``AGENTS`` rollouts as agents record them (step-major fields), observations far from the start's moments."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for a in range(AGENTS):
        policy = Policy(copy.deepcopy(model), spaces, N)
        states = StateLayout.of(policy.model, SEQ)
        recs: dict[str, list[torch.Tensor]] = {k: [] for k in ("obs", "actions", "values", "neglogp", "rewards",
                                                                "dones", FIELD)}
        chunk = None
        for t in range(HORIZON):
            obs = torch.randn(N, *spaces.obs_shape, generator=g) * (1 + a) + a
            if states is not None and t % SEQ == 0:
                chunk = states.flatten(policy.states)
            res = policy.act(obs)
            done = (torch.rand(N, generator=g) < 0.2).to(torch.uint8)
            for k, v in (("obs", obs), ("actions", res["actions"]), ("values", res["values"]),
                         ("neglogp", res["neglogp"]), ("rewards", torch.randn(N, generator=g) + a), ("dones", done)):
                recs[k].append(v)
            if states is not None:
                recs[FIELD].append(states.piece(chunk, t))
                policy.reset_done(done)
        out.append({k: torch.cat(v) for k, v in recs.items() if v})
    return out


def train(plan: Any, model: torch.nn.Module, world: int, shares: list[list[list[int]]],
          batches: list[list[dict[str, torch.Tensor]]]) -> list[torch.nn.Module]:
    """``world`` trainers in threads, 4 minibatches of the group's rows; round ``k`` gives trainer ``r`` the
    rollouts ``shares[k][r]``."""
    group = ThreadSum(world)
    states = StateLayout.of(model, SEQ)
    members = []
    for r in range(world):
        m = copy.deepcopy(model)
        members.append((m, Learner(m, make_optimiser(m, plan.train), plan.train, group.for_rank(r), ppo=True,
                                   num_minibatches=4, world=world, leader=r == 0, rank=r,
                                   device=torch.device("cpu"), seed=plan.seed, max_frames=10**6, states=states)))
    for k, batch in enumerate(batches):
        threads = [threading.Thread(target=lr.step, args=([(N, batch[i]) for i in shares[k][r]], True))
                   for r, (_, lr) in enumerate(members)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
            assert not t.is_alive(), "a trainer waits on a collective the others never joined"
    return [m for m, _ in members]


def state(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Weights and normalisers (rl-games' running mean, variance and count)."""
    return {k: v.detach().clone() for k, v in m.state_dict().items() if v.is_floating_point()}


def even(world: int) -> list[list[int]]:
    per = AGENTS // world
    return [list(range(r * per, (r + 1) * per)) for r in range(world)]


#: a round's agents per trainer: even shares, or uneven ones with a trainer that has nothing in round 2
SHARES = {"even": None, "uneven": [[[0], [1, 2, 3]], [[0, 1, 2, 3], []], [[0, 1], [2, 3]]]}


@pytest.mark.parametrize(("kind", "world", "shares"), [("continuous", 2, "even"), ("discrete", 4, "even"),
                                                       ("gru", 2, "even"), ("continuous", 2, "uneven")])
def test_g_trainers_fed_one_batch_make_one_trainers_update(kind: str, world: int, shares: str,
                                                            tmp_path: Path) -> None:
    plan, model, spaces = make(tmp_path, kind)
    batches = [rollouts(model, spaces, seed) for seed in range(ROUNDS)]
    ref = state(train(plan, model, 1, [[list(range(AGENTS))]] * ROUNDS, batches)[0])
    start = state(model)
    assert max((ref[k] - start[k]).abs().max().item() for k in ref if "mean_std" not in k) > 0.01  # it learned
    got = train(plan, model, world, SHARES[shares] or [even(world)] * ROUNDS, batches)
    for m in got:
        for key, v in state(m).items():
            torch.testing.assert_close(v, ref[key], atol=2e-6, rtol=2e-5, msg=key)
    for m in got[1:]:  # and every trainer holds the same bits
        assert all(torch.equal(a, b) for a, b in zip(state(got[0]).values(), state(m).values(), strict=True))
