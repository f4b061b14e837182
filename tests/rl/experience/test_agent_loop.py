"""The agent loop's rows are rl-games' buffer, time-outs included, and the update they make is rl-games' update.

rl-games' own agent (layout tcg_ex) plays two epochs of a deterministic env whose episodes end by termination
and by its time limit (``time_outs`` in the step's info, as gmiexp's simulators report them); the agent loop's
:class:`~gmiexp.rl.experience.agent_loop.Collector` plays the same env with the same weights and the same torch
random stream. Its rows, rebuilt into a rollout as the tdg_ex trainer rebuilds them
(:func:`~gmiexp.rl.experience.fed_update.as_rollout`), must equal what rl-games' buffer held (rewards with
``value_bootstrap``'s ``gamma x value`` on timed-out steps), the trainer agent's update on them must be rl-games'
update bit for bit, and the learner's GAE on them must give rl-games' returns.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch
from rlgames_parity import H, N, RecordingContinuous, RecordingDiscrete, StepEnv, build, params

from gmiexp.comm.channels import DEFAULT_FIELDS
from gmiexp.config import TrainConfig
from gmiexp.rl.experience.agent_loop import Collector, Play, stepped_rewards
from gmiexp.rl.experience.fed_update import as_rollout
from gmiexp.rl.learner.gae import gae
from gmiexp.rl.rlgames.fed import FedContinuousAgent, FedDiscreteAgent, RolloutSource
from gmiexp.rl.rlgames.policy import Policy, Spaces, experience_fields
from gmiexp.rl.rlgames.states import StateLayout

LIMIT = 6  # steps: environments 2 and 3 (episodes of 7 and 8 steps) also end by the time limit


class TimeLimitEnv(StepEnv):
    """:class:`StepEnv` under a time limit: an episode ends when it terminates or after ``LIMIT`` steps.

    The clock (observations, rewards, termination) restarts at a termination only, so episodes cut by the
    limit terminate a step or two into the next one; ``time_outs`` flags the steps the limit cut.
    """

    def __init__(self, continuous: bool) -> None:
        super().__init__((5,), continuous)
        self.k = torch.zeros(N)
        self.ends = {"terminated": 0, "time_outs": 0}
        self.resets = 0

    def reset(self) -> Any:
        self.t, self.k = torch.arange(N, dtype=torch.float32), torch.zeros(N)
        self.resets += 1
        return self._obs()

    def step(self, actions: Any) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        a = torch.as_tensor(actions, dtype=torch.float32).reshape(N, -1)
        reward = -(a - 0.3).pow(2).sum(1) + torch.cos(self.t)
        self.t, self.k = self.t + 1, self.k + 1
        term = (self.t % (5 + torch.arange(N))) == 0
        trunc = (self.k >= LIMIT) & ~term
        done = term | trunc
        self.t = torch.where(term, torch.zeros_like(self.t), self.t)
        self.k = torch.where(done, torch.zeros_like(self.k), self.k)
        self.ends["terminated"] += int(term.sum())
        self.ends["time_outs"] += int(trunc.sum())
        return self._obs(), reward, done.to(torch.uint8), {"time_outs": trunc}


class Keeping:
    """rl-games' agent that also keeps the returns of the batch it played (its ``discount_values``)."""

    batch: dict[str, torch.Tensor]

    def play_steps(self) -> dict[str, Any]:
        batch = super().play_steps()  # type: ignore[misc]
        self.batch = {"returns": batch["returns"].clone()}
        return batch

    def play_steps_rnn(self) -> dict[str, Any]:
        batch = super().play_steps_rnn()  # type: ignore[misc]
        self.batch = {"returns": batch["returns"].clone()}
        return batch


class KeepingContinuous(Keeping, RecordingContinuous):
    pass


class KeepingDiscrete(Keeping, RecordingDiscrete):
    pass


def differ(got: torch.Tensor, want: torch.Tensor) -> str:
    """Empty when bit-identical, else how many elements differ and by how much."""
    got = got.reshape(want.shape).to(want.dtype)
    if torch.equal(got, want):
        return ""
    bad = got != want
    diff = (got.double() - want.double()).abs().max().item()
    return f"{int(bad.sum())} of {want.numel()} elements differ, the largest by {diff:.3g}"


def the_weights_of(dst: Any, src: Any) -> None:
    """``dst`` (a trainer agent) starts the epoch where ``src`` (rl-games' agent) does."""
    dst.model.load_state_dict(src.model.state_dict())
    dst.optimizer.load_state_dict(copy.deepcopy(src.optimizer.state_dict()))
    dst.last_lr = src.last_lr
    dst.update_lr(src.last_lr)


CASES = {"continuous": ("continuous", {}), "discrete": ("discrete", {}), "lstm": ("lstm", {}),
         # rl-games' other play_steps keys: no bootstrap; states kept on done; environments (and states) reset
         # before epoch 2
         "continuous-no-bootstrap-resets": ("continuous", {"value_bootstrap": False, "epochs_between_resets": 2}),
         "lstm-keep-states-resets": ("lstm", {"zero_rnn_on_done": False, "epochs_between_resets": 2})}


@pytest.mark.parametrize("case", list(CASES))
def test_agent_loop_rows_and_their_update_are_rl_games_on_a_time_limited_task(case: str, tmp_path: Path) -> None:
    kind, extra = CASES[case]
    continuous = kind != "discrete"
    p = params(tmp_path, kind, **extra)
    c = p["config"]
    ref_env, env = TimeLimitEnv(continuous), TimeLimitEnv(continuous)
    ref = build(KeepingContinuous if continuous else KeepingDiscrete, p, ref_env)
    fed = build(FedContinuousAgent if continuous else FedDiscreteAgent, p, RolloutSource(env.get_env_info()))
    spaces = Spaces.of(env.get_env_info())
    layout = StateLayout.of(ref.model, c["seq_length"])
    policy = Policy(copy.deepcopy(ref.model), spaces, N)
    play = Play(c["gamma"], c.get("value_bootstrap", True), c.get("zero_rnn_on_done", True),
                c.get("epochs_between_resets", 0))
    fields = experience_fields(spaces, list(DEFAULT_FIELDS), layout)
    col = Collector(env, N, policy, c["reward_shaper"], fields, H, layout, torch.device("cpu"), play)
    for agent in (ref, fed):
        agent.init_tensors()
        agent.obs = agent.env_reset()
    before: dict[int, torch.Tensor] = {}
    for epoch in range(2):  # the second epoch starts mid-run: normalisers, Adam and the episodes moved
        policy.model.load_state_dict(ref.model.state_dict())  # the weights the agent GMI reads off the board
        the_weights_of(fed, ref)
        rng = torch.get_rng_state()
        ref.update_epoch()
        ref.train_epoch()  # rl-games' play_steps, then its update
        torch.set_rng_state(rng)  # the agent GMI samples its actions from the same stream
        buf = col.rollout(version=epoch, epoch=epoch + 1)  # rl-games counts its epochs from 1
        rows = {k: v.reshape(-1, *v.shape[2:]).clone() for k, v in buf.items()}  # as the channels deliver them
        got, want = as_rollout([(0, N, rows)], H, before, layout), ref.rollout
        assert set(got.steps) == set(want.steps)
        for k, v in want.steps.items():
            assert not differ(got.steps[k], v), f"{case}, epoch {epoch}: {k}: {differ(got.steps[k], v)}"
        assert torch.equal(got.last_values, want.last_values) and torch.equal(got.last_dones, want.last_dones)
        if layout is not None:
            assert got.rnn_states is not None and want.rnn_states is not None
            for a, b in zip(got.rnn_states, want.rnn_states, strict=True):
                assert torch.equal(a, b)
        # the learner's GAE on the rows: rl-games' returns (its batch is environment-major)
        returns = gae(rows, H + 1, N, c["gamma"], c["tau"])["returns"]
        assert not differ(returns.reshape(H, N).T, ref.batch["returns"].reshape(N, H)), "the learner's returns"
        fed.update_epoch()
        fed.vec_env.put(got)
        fed.train_epoch()  # the tdg_ex trainer's update on the agent loop's rows
        for (k, a), (k2, b) in zip(ref.model.state_dict().items(), fed.model.state_dict().items(), strict=True):
            assert k == k2 and not differ(b, a), f"{case}, epoch {epoch}: {k} after the update: {differ(b, a)}"
    assert env.ends["terminated"] and env.ends["time_outs"], "episodes must end both ways"
    assert env.resets == ref_env.resets == (2 if c.get("epochs_between_resets") else 1)


def test_play_reads_the_train_config_as_rl_games_reads_its_params() -> None:
    assert Play.of(TrainConfig(gamma=0.9)) == Play(0.9, True, True, 0)  # rl-games' defaults
    cfg = TrainConfig(gamma=0.9, value_bootstrap=False,
                      rlgames_config={"zero_rnn_on_done": False, "epochs_between_resets": 3})
    play = Play.of(cfg)
    assert play == Play(0.9, False, False, 3)
    assert [e for e in range(1, 10) if play.resets(e)] == [3, 6, 9]  # rl-games' set_eval: epoch_num % N == 0
    assert not any(Play(0.9).resets(e) for e in range(1, 10))


def test_stepped_rewards_add_the_bootstrap_on_timed_out_steps_only() -> None:
    shaped, values = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([10.0, 20.0, 30.0])
    cut = {"time_outs": torch.tensor([False, True, False])}
    assert torch.equal(stepped_rewards(shaped, values, cut, 0.5), torch.tensor([1.0, 12.0, 3.0]))
    assert torch.equal(stepped_rewards(shaped, values, cut, None), shaped)  # value_bootstrap off
    assert torch.equal(stepped_rewards(shaped, values, {}, 0.5), shaped)  # a simulator without time-outs
