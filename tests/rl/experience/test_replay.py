"""Off-policy replay in-process: whole rollouts in the ExperienceStore, selection, eviction, re-estimated
values and priorities, the truncated importance weight, and the trainer's rollout-order check."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from coin_policy import Coin
from torch import nn

from gmiexp.comm.channels import FieldSpec
from gmiexp.config import TrainConfig
from gmiexp.rl.experience.replay import MIN_PRIORITY, ReplayStore, priority
from gmiexp.rl.experience.trainer import TrainLoop, spans
from gmiexp.rl.learner.losses import truncated_is_weight
from gmiexp.rl.learner.update import Learner, make_optimiser
from gmiexp.shm.cleanup import leftovers

H, N = 4, 2  # horizon, envs per rollout
FIELDS = [FieldSpec("obs", (3,)), FieldSpec("actions", (), torch.int64), FieldSpec("rewards"),
          FieldSpec("values"), FieldSpec("dones", (), torch.uint8), FieldSpec("neglogp"),
          FieldSpec("seq", (), torch.int64), FieldSpec("version", (), torch.int64)]


def rollout(k: int, n: int = N, reward: float = 1.0) -> dict[str, torch.Tensor]:
    """The ``k``-th rollout of an agent: seq numbers overlap the previous rollout by one record."""
    rows = H * n
    seq = k * (H - 1) * n + torch.arange(rows)
    return {"obs": seq[:, None].float().repeat(1, 3), "actions": seq % 2, "rewards": torch.full((rows,), reward),
            "values": torch.zeros(rows), "dones": torch.zeros(rows, dtype=torch.uint8),
            "neglogp": torch.full((rows,), 0.5), "seq": seq, "version": torch.full((rows,), k)}


def make(tag: str, capacity_rows: int = 3 * H * N, selection: str = "uniform", eviction: str = "fifo",
         max_envs: int = N) -> ReplayStore:
    return ReplayStore(FIELDS, H, max_envs, capacity_rows, selection, eviction, gamma=0.9, tau=0.8, seed=1,
                       name="rtest", tag=tag)


def firsts(rs: list) -> list[int]:
    return [int(b["seq"][0]) // ((H - 1) * N) for _, _, b in rs]


def test_store_keeps_whole_rollouts_and_leaves_no_segment(tag: str) -> None:
    r = make(tag, capacity_rows=3 * H * N + H * N - 1)  # records -> whole rollouts (3)
    assert leftovers(tag) == []  # private: unlinked at once
    assert r.capacity == 3 and r.sample(2) == []  # nothing stored yet: nothing to replay
    for k in range(3):
        r.add(N, rollout(k))
    got = r.sample(5)  # uniform draws with replacement
    assert len(got) == 5
    for _, n, b in got:
        assert n == N and b["seq"].shape == (H * N,)
        assert torch.equal(b["seq"], b["seq"][0] + torch.arange(H * N))  # contiguous: bootstrap record kept
        assert torch.equal(b["obs"][:, 0], b["seq"].float())
    assert r.stats() == {"replay/stored": 3, "replay/capacity": 3, "replay/added": 3}
    r.close()


def test_uniform_draws_beyond_capacity_in_pieces(tag: str) -> None:
    r = make(tag, capacity_rows=2 * H * N)
    r.add(N, rollout(0))
    r.add(N, rollout(1))
    assert len(r.sample(7)) == 7  # more than the store's capacity of 2, with replacement
    r.close()


@pytest.mark.parametrize(("eviction", "kept"), [("fifo", [1, 2, 3]), ("lifo", [0, 1, 3])])
def test_eviction_drops_whole_rollouts(tag: str, eviction: str, kept: list[int]) -> None:
    r = make(tag, eviction=eviction, selection="fifo")
    for k in range(4):  # the 4th does not fit: FIFO drops rollout 0, LIFO the newest stored (2)
        r.add(N, rollout(k))
    assert sorted(firsts(r.sample(10))) == kept  # fifo selection: distinct, at most what is stored
    r.close()


def test_fifo_lifo_topk_and_prioritized_selection(tag: str) -> None:
    for sel, want in (("fifo", [0, 1]), ("lifo", [2, 1]), ("topk", [1, 2])):
        r = make(tag, selection=sel)
        for k, rew in enumerate((0.1, 5.0, 1.0)):  # priority = mean |advantage| grows with the reward
            r.add(N, rollout(k, reward=rew))
        assert firsts(r.sample(2)) == want, sel
        r.close()
    r = make(tag, selection="prioritized")
    for k, rew in enumerate((0.0, 5.0, 0.0)):  # zero rewards and values: priority MIN_PRIORITY only
        r.add(N, rollout(k, reward=rew))
    assert set(firsts(r.sample(50))) == {1}
    r.close()


def test_priority_is_mean_abs_advantage() -> None:
    assert priority(torch.tensor([1.0, -3.0])) == pytest.approx(2.0 + MIN_PRIORITY)
    assert priority(torch.zeros(0)) == MIN_PRIORITY


class ValueNet(nn.Module):
    """rl-games' model interface, enough for replay: values from the observation, in eval mode denormalised."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(scale))

    def forward(self, d: dict) -> dict:
        assert not self.training and d["is_train"] is False
        return {"values": (d["obs"][:, :1] * self.w).detach()}


def test_refresh_reestimates_values_and_updates_the_priority(tag: str) -> None:
    r = make(tag, selection="topk")
    r.add(N, rollout(0, reward=0.0))  # zero rewards and values: priority MIN_PRIORITY
    r.add(N, rollout(1, reward=0.5))
    model = ValueNet(1.0).train()
    (i, n, b), = r.sample(1)
    assert int(b["seq"][0]) == (H - 1) * N  # rollout 1 has the larger priority
    r0 = [x for x in r.sample(2) if x[0] != i][0]
    n, fresh = r.refresh(model, r0, torch.device("cpu"))
    assert model.training  # mode restored
    assert torch.equal(fresh["values"], fresh["obs"][:, 0])  # the current critic's values
    assert torch.count_nonzero(r.store.gather(torch.tensor([r0[0]]))["values"]) == 0  # the store is untouched
    assert float(r.store.index.priority[r0[0]]) > float(r.store.index.priority[i])  # now the most to learn
    assert firsts(r.sample(1)) == [0]
    r.close()


def test_rollouts_of_fewer_envs_come_back_at_their_size(tag: str) -> None:
    r = make(tag, max_envs=4, capacity_rows=H * 4)
    r.add(2, rollout(0, n=2))
    (_, n, b), = r.sample(1)
    assert n == 2 and b["seq"].shape == (H * 2,) and torch.equal(b["seq"], torch.arange(H * 2))
    r.close()


def test_truncated_importance_weight() -> None:
    mu = torch.tensor([0.25, 0.9, 0.5])  # behaviour probabilities; the current policy gives 0.5 to each
    pi_neglogp = torch.full((3,), math.log(2.0), requires_grad=True)
    w = truncated_is_weight(-mu.log(), pi_neglogp)
    assert torch.allclose(w, torch.tensor([1.0, 0.5 / 0.9, 1.0]))  # pi/mu = 2 and 1 truncated to 1
    assert not w.requires_grad
    assert torch.allclose(truncated_is_weight(-mu.log(), pi_neglogp, cap=1.5), torch.tensor([1.5, 0.5 / 0.9, 1.0]))


def coin_update(ppo: bool) -> Learner:
    train = TrainConfig(mini_epochs=1, learning_rate=1e-3, horizon_length=H - 1, e_clip=0.2, critic_coef=0.0,
                        entropy_coef=0.0, bounds_loss_coef=0.0, clip_value=False)
    model = Coin()
    return Learner(model, make_optimiser(model, train), train, lambda t: t, ppo=ppo, num_minibatches=1, world=1,
                   leader=True, device=torch.device("cpu"), seed=0, max_frames=1)


@pytest.mark.parametrize("ppo", [False, True])
def test_off_policy_a2c_weights_the_gradient_ppo_keeps_its_clipped_ratio(ppo: bool) -> None:
    u = coin_update(ppo)
    mu = torch.tensor([0.25, 0.9, 0.5, 0.1])
    d = {"obs": torch.zeros(4, 1), "actions": torch.tensor([0, 1, 0, 1]), "neglogp": -mu.log(),
         "advantages": torch.tensor([1.0, 2.0, -1.0, 0.5]), "values": torch.zeros(4), "returns": torch.zeros(4)}
    idx = torch.arange(4)
    on = float(u.loss(d, idx)[0].detach())
    off = float(u.loss(d, idx, off_policy=True)[0].detach())
    ln2 = math.log(2.0)
    if ppo:  # the ratio against mu already is the correction
        ratio = 0.5 / mu
        adv = d["advantages"]
        want = torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2)).mean()
        assert on == pytest.approx(off) == pytest.approx(float(want))
    else:
        w = (0.5 / mu).clamp(max=1.0)
        assert on == pytest.approx(float((ln2 * d["advantages"]).mean()))
        assert off == pytest.approx(float((w * ln2 * d["advantages"]).mean()))


def loop(shared: bool) -> TrainLoop:
    channels = [[0, 2], [1, 2]] + ([[0, 3], [1, 3]] if shared else [])
    plan = SimpleNamespace(train=SimpleNamespace(horizon_length=H - 1), channels=channels,
                           gmi=lambda a: SimpleNamespace(num_envs=N))
    role = SimpleNamespace(plan=plan)
    return TrainLoop(role, None, None, {0: None, 1: None})  # type: ignore[arg-type]


@pytest.mark.parametrize("shared", [False, True])
def test_rollout_order_check(shared: bool) -> None:
    t = loop(shared)
    t.check(0, rollout(0))
    t.check(0, rollout(3))  # rollouts 1 and 2 went to another trainer (or were lost)
    assert t.seq_errors == (0 if shared else 1)
    t = loop(shared)
    for k in (0, 1, 1):  # a duplicate is an error either way
        t.check(1, rollout(k))
    assert t.seq_errors == 1 and t.rollouts[1] == [0, 1]
    t = loop(shared)
    bad = rollout(1)
    bad["seq"][3] += 1  # a row out of place inside the rollout
    t.check(0, rollout(0))
    t.check(0, bad)
    assert t.seq_errors == 1 and t.rollouts[0] == [0]


def test_the_checkpoint_epoch_counts_the_agents_iterations_not_the_updates() -> None:
    """Over the group: the furthest agent's rollouts, wherever they went (a stale one counts; it was rolled out)."""
    t = loop(shared=True)
    t.plan.trainer_group, t.role.gmi_id = [2, 3], 2
    other = torch.tensor([0.0, 5.0], dtype=torch.float64)  # trainer 3 got agent 1's rollout 4 last
    t.role.allreduce = lambda x: x.add_(other)
    for k in (0, 1, 2):
        t.check(0, rollout(k))
    t.check(1, rollout(0))
    assert t.iterations() == 5
    other.zero_()
    assert t.iterations() == 3


def test_spans() -> None:
    assert spans([]) == [] and spans([4, 0, 1, 2, 6, 7]) == [[0, 2], [4, 4], [6, 7]]


class MeanOfFrames(nn.Module):
    """A critic that values a frame by its mean pixel: sees what the replay's refresh hands the model."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))
        self.seen: list[torch.Tensor] = []

    def forward(self, d: dict) -> dict:
        self.seen.append(d["obs"])
        return {"values": self.w * d["obs"].flatten(1).mean(1, keepdim=True)}


def test_replay_keeps_uint8_frames_and_refresh_scales_them(tag: str) -> None:
    frames = [FieldSpec("obs", (2, 3, 3), torch.uint8), *FIELDS[1:]]
    r = ReplayStore(frames, H, N, 3 * H * N, "uniform", "fifo", gamma=0.9, tau=0.8, seed=1, name="rpix", tag=tag)
    try:
        batch = rollout(0)
        batch["obs"] = torch.arange(H * N * 18).reshape(H * N, 2, 3, 3).to(torch.uint8)
        r.add(N, batch)
        (i, n, got), = r.sample(1)
        assert got["obs"].dtype == torch.uint8 and torch.equal(got["obs"], batch["obs"])
        model = MeanOfFrames()
        _, fresh = r.refresh(model, (i, n, got), torch.device("cpu"))
        assert model.seen[0].dtype == torch.float32 and float(model.seen[0].max()) <= 1.0  # rl-games' 1/255
        want = batch["obs"].float().div(255).flatten(1).mean(1)
        assert torch.allclose(fresh["values"], want)
    finally:
        r.close()
