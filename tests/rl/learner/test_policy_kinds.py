"""The learner on every policy kind: CNN on uint8 frames, discrete and multi-discrete heads, RNN sequences, separate.

* An RNN update equals a slow reference that steps the recurrent model one row at a time from the
  states the acting policy had, resetting them where an episode ended (rl-games' convention).
* One update of two trainers (each with its own rollout, gradients summed by a reduction) equals one
  trainer's update on both rollouts, for each kind.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from gmitest import compose_config
from rl_games.common import common_losses

from gmiexp.plan import Plan
from gmiexp.planner.build import build_plan
from gmiexp.rl.learner.gae import gae
from gmiexp.rl.learner.update import Learner, make_optimiser
from gmiexp.rl.rlgames.policy import Policy, Spaces, build_model, preproc_obs
from gmiexp.rl.rlgames.states import FIELD, StateLayout

CNN = {"type": "conv2d", "activation": "relu", "initializer": {"name": "default"}, "regularizer": {"name": "None"},
       "permute_input": False, "convs": [{"filters": 4, "kernel_size": 3, "strides": 2, "padding": 0}]}
FRAMES = (4, 12, 12)
KINDS: dict[str, tuple[dict[str, Any], Spaces]] = {
    "cnn": ({"cnn": CNN}, Spaces(FRAMES, False, 3, obs_dtype=torch.uint8)),
    "cnn-multi-discrete": ({"cnn": CNN}, Spaces(FRAMES, False, 2, obs_dtype=torch.uint8, nvec=(3, 2))),
    "rnn-lstm-separate": ({"rnn": {"name": "lstm", "units": 8, "layers": 1, "before_mlp": False},
                           "separate": True}, Spaces((4,), False, 2)),
    "rnn-gru": ({"rnn": {"name": "gru", "units": 8, "layers": 2, "before_mlp": True}}, Spaces((4,), False, 2)),
    "separate": ({"separate": True}, Spaces((4,), False, 2)),
}
HORIZON, SEQ, N = 9, 4, 3


def make_plan(tmp_path: Path, task: dict[str, Any]) -> Plan:
    cfg = compose_config("layout=tdg_ex", "task=Cartpole", "gmis_per_gpu=1", f"num_envs={N}", "train.device=cpu",
                         f"train.horizon_length={HORIZON - 1}", f"train.seq_length={SEQ}", "train.mini_epochs=1",
                         "train.lr_schedule=identity", "train.normalize_input=false", "train.normalize_value=false",
                         "train.normalize_advantage=false", "train.truncate_grads=false", "train.entropy_coef=0.01")
    plan, _ = build_plan(cfg, tmp_path)
    plan.task.mlp_units = [16]
    for k, v in task.items():
        setattr(plan.task, k, v)
    return plan


def collect(model: torch.nn.Module, spaces: Spaces, seed: int, states: StateLayout | None = None
            ) -> tuple[dict[str, torch.Tensor], dict[int, tuple[torch.Tensor, ...]]]:
    """One rollout as an agent records it (fields step-major, ``horizon x N`` rows) and the chunk-start states."""
    g = torch.Generator().manual_seed(seed)
    policy = Policy(model, spaces, N)
    recs: dict[str, list[torch.Tensor]] = {k: [] for k in ("obs", "actions", "values", "neglogp", "rewards", "dones")}
    recs[FIELD] = []
    starts, chunk = {}, None
    for t in range(HORIZON):
        if spaces.obs_dtype == torch.uint8:
            obs = torch.randint(0, 256, (N, *spaces.obs_shape), generator=g, dtype=torch.uint8)
        else:
            obs = torch.randn(N, *spaces.obs_shape, generator=g)
        if states is not None and t % states.seq_length == 0:
            chunk = states.flatten(policy.states)
            starts[t] = tuple(s.clone() for s in policy.states)
        out = policy.act(obs)
        done = (torch.rand(N, generator=g) < 0.3).to(torch.uint8)
        for k, v in (("obs", obs), ("actions", out["actions"]), ("values", out["values"]),
                     ("neglogp", out["neglogp"]), ("rewards", torch.randn(N, generator=g)), ("dones", done)):
            recs[k].append(v)
        if states is not None:
            recs[FIELD].append(states.piece(chunk, t))
            policy.reset_done(done)
    batch = {k: torch.cat(v) for k, v in recs.items() if v}
    return batch, starts


def learner(model: torch.nn.Module, plan: Plan, reduce: Any, world: int, leader: bool,
            opt: torch.optim.Optimizer | None = None) -> Learner:
    return Learner(model, opt or make_optimiser(model, plan.train), plan.train, reduce, ppo=True, num_minibatches=1,
                   world=world, leader=leader, device=torch.device("cpu"), seed=0, max_frames=10**6,
                   states=StateLayout.of(model, plan.train.seq_length))


def reference_gradient(model: torch.nn.Module, plan: Plan, batch: dict[str, torch.Tensor],
                       starts: dict[int, tuple[torch.Tensor, ...]]) -> list[torch.Tensor]:
    """The PPO loss's gradient, the recurrent model stepped row by row (``seq_length`` 1) per environment."""
    tr = plan.train
    d = gae(batch, HORIZON, N, tr.gamma, tr.tau)
    dones = batch["dones"].reshape(HORIZON, N)
    model.train()
    model.zero_grad()
    rows = []
    for e in range(N):
        h = None
        for t in range(HORIZON - 1):
            if t % SEQ == 0:
                h = tuple(s[:, e:e + 1].clone() for s in starts[t])
            elif dones[t - 1, e]:
                h = tuple(torch.zeros_like(s) for s in h)
            i = t * N + e
            res = model({"is_train": True, "prev_actions": d["actions"][i:i + 1], "rnn_states": h, "seq_length": 1,
                         "obs": preproc_obs(d["obs"][i:i + 1])})
            h = tuple(res["rnn_states"])
            a = common_losses.actor_loss(d["neglogp"][i:i + 1], res["prev_neglogp"].reshape(1),
                                         d["advantages"][i:i + 1], True, tr.e_clip)
            c = common_losses.critic_loss(model, d["values"][i:i + 1], res["values"].reshape(1), tr.e_clip,
                                          d["returns"][i:i + 1], tr.clip_value)
            rows.append(a + 0.5 * tr.critic_coef * c - tr.entropy_coef * res["entropy"].reshape(1))
    torch.cat(rows).mean().backward()
    return [p.grad.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("kind", ["rnn-lstm-separate", "rnn-gru"])
def test_rnn_update_equals_a_row_by_row_reference(kind: str, tmp_path: Path) -> None:
    task, spaces = KINDS[kind]
    plan = make_plan(tmp_path, task)
    model = build_model(plan, plan.gmi(plan.trainer_group[0]), spaces, torch.device("cpu"))
    states = StateLayout.of(model, SEQ)
    assert states is not None and states.count == (4 if kind == "rnn-lstm-separate" else 1)
    batch, starts = collect(model, spaces, seed=1, states=states)
    assert batch["dones"][: (HORIZON - 2) * N].any()  # resets inside sequences are exercised
    ref_model = copy.deepcopy(model)
    want = reference_gradient(ref_model, plan, batch, starts)
    lr = 0.05
    before = [p.detach().clone() for p in model.parameters()]
    update = learner(model, plan, lambda t: t, world=1, leader=True, opt=torch.optim.SGD(model.parameters(), lr=lr))
    assert update.step([(N, batch)], done=True)[0] == (HORIZON - 1) * N
    for b, p, g in zip(before, model.parameters(), want, strict=True):
        torch.testing.assert_close(p.detach(), b - lr * g, atol=1e-6, rtol=1e-5)


def test_rnn_update_depends_on_the_carried_states(tmp_path: Path) -> None:
    """Zeroed chunk-start states give another update: the states the channels carry are really used."""
    task, spaces = KINDS["rnn-gru"]
    plan = make_plan(tmp_path, task)
    model = build_model(plan, plan.gmi(plan.trainer_group[0]), spaces, torch.device("cpu"))
    batch, _ = collect(model, spaces, seed=2, states=StateLayout.of(model, SEQ))
    out = []
    for b in (batch, {**batch, FIELD: torch.zeros_like(batch[FIELD])}):
        m = copy.deepcopy(model)
        learner(m, plan, lambda t: t, 1, True, torch.optim.SGD(m.parameters(), lr=0.05)).step([(N, b)], True)
        out.append(torch.cat([p.detach().reshape(-1) for p in m.parameters()]))
    assert not torch.allclose(out[0], out[1])


class SumOfTwo:
    """A sum over two trainers in threads: each call contributes its tensor and gets the total."""

    def __init__(self) -> None:
        self.slots: list[torch.Tensor | None] = [None, None]
        self.barrier = threading.Barrier(2, timeout=30)

    def member(self, i: int) -> Any:
        def reduce(t: torch.Tensor) -> torch.Tensor:
            self.slots[i] = t.clone()
            self.barrier.wait()
            total = self.slots[0] + self.slots[1]
            self.barrier.wait()
            return t.copy_(total)

        return reduce


@pytest.mark.parametrize("kind", list(KINDS))
def test_two_trainers_apply_the_gradient_of_one_on_the_whole_batch(kind: str, tmp_path: Path) -> None:
    task, spaces = KINDS[kind]
    plan = make_plan(tmp_path, task)
    model = build_model(plan, plan.gmi(plan.trainer_group[0]), spaces, torch.device("cpu"))
    states = StateLayout.of(model, SEQ)
    rollouts = [collect(model, spaces, seed=s, states=states)[0] for s in (3, 4)]
    if spaces.obs_dtype == torch.uint8:
        assert rollouts[0]["obs"].dtype == torch.uint8 and rollouts[0]["obs"].shape == (HORIZON * N, *FRAMES)
    if spaces.nvec:
        assert rollouts[0]["actions"].shape == (HORIZON * N, len(spaces.nvec))
    one = copy.deepcopy(model)
    learner(one, plan, lambda t: t, 1, True).step([(N, r) for r in rollouts], done=True)
    pair, sums = [copy.deepcopy(model), copy.deepcopy(model)], SumOfTwo()
    results: list[Any] = [None, None]

    def run(i: int) -> None:
        results[i] = learner(pair[i], plan, sums.member(i), 2, i == 0).step([(N, rollouts[i])], done=True)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r[1] for r in results] == [2 * (HORIZON - 1) * N] * 2  # both trained, on the group's rows
    changed = False
    for p1, pa, pb, p0 in zip(one.parameters(), pair[0].parameters(), pair[1].parameters(), model.parameters(),
                              strict=True):
        torch.testing.assert_close(pa, pb, atol=0, rtol=0)
        torch.testing.assert_close(pa, p1, atol=1e-6, rtol=1e-4)
        changed |= not torch.equal(p1, p0)
    assert changed
