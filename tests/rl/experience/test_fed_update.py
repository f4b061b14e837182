"""The TDG_EX trainer rebuilds rl-games' own rollout from the rows the channels deliver, bit for bit.

rl-games' agent plays two epochs of a deterministic env (:mod:`rlgames_parity`); each rollout is written as the
agent loop sends it (``horizon_length`` stepped records with "this step ended an episode" flags, then the
bootstrap record with the next observation's value; a recurrent policy's chunk-start states spread over the
rows) and :func:`gmiexp.rl.experience.fed_update.as_rollout` must return exactly what rl-games' buffer held
(:meth:`~gmiexp.rl.rlgames.fed.Rollout.of_agent`). With ``tests/rl/rlgames/test_fed.py`` (that rollout gives
rl-games' own update), the trainer's update on channel rows is rl-games' update.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from gmitest import run_cli
from rlgames_parity import H, N, RecordingContinuous, RecordingDiscrete, StepEnv, build, params

from gmiexp.plan import Plan
from gmiexp.rl.experience.fed_update import as_rollout
from gmiexp.rl.experience.trainer import TrainLoop
from gmiexp.rl.rlgames.fed import Rollout
from gmiexp.rl.rlgames.states import FIELD, StateLayout
from gmiexp.rl.state import model_digest


def channel_rows(r: Rollout, states: StateLayout | None) -> dict[str, torch.Tensor]:
    """What the agent loop sends for the rollout ``r``: ``(H + 1) * N`` step-major rows per field."""
    s = r.steps
    after = torch.cat([s["dones"][1:], r.last_dones.reshape(1, N)])  # this step ended an episode

    def rows(steps: torch.Tensor, boot: torch.Tensor) -> torch.Tensor:
        return torch.cat([steps, boot.reshape(1, *steps.shape[1:])]).reshape(-1, *steps.shape[2:])

    out = {"obs": rows(s["obses"], torch.zeros_like(s["obses"][0])), "actions": rows(s["actions"], s["actions"][0]),
           "neglogp": rows(s["neglogpacs"], s["neglogpacs"][0]),
           "values": rows(s["values"].squeeze(-1), r.last_values.squeeze(-1)),
           "rewards": rows(s["rewards"].squeeze(-1), torch.zeros(N)),
           "dones": rows(after, torch.zeros(N, dtype=after.dtype))}
    if "mus" in s:
        out["mus"], out["sigmas"] = rows(s["mus"], s["mus"][0]), rows(s["sigmas"], s["sigmas"][0])
    if states is not None:
        assert r.rnn_states is not None
        pieces = torch.zeros(H + 1, N, states.width)
        for t in range(H):
            c = t // states.seq_length
            flat = states.flatten(tuple(m[c] for m in r.rnn_states))
            pieces[t] = states.piece(flat, t)
        out[FIELD] = pieces.reshape(-1, states.width)
    return out


@pytest.mark.parametrize("kind", ["continuous", "discrete", "lstm"])
def test_the_channel_rows_become_rl_games_rollout(kind: str, tmp_path: Path) -> None:
    continuous = kind != "discrete"
    env = StepEnv((5,), continuous)
    ref = build(RecordingContinuous if continuous else RecordingDiscrete, params(tmp_path, kind), env)
    layout = StateLayout.of(ref.model, 4)
    ref.init_tensors()
    ref.obs = ref.env_reset()
    before: dict[int, torch.Tensor] = {}
    for epoch in range(2):  # the second rollout starts from the first one's last flags
        ref.update_epoch()
        ref.train_epoch()
        want = ref.rollout
        got = as_rollout([(7, N, channel_rows(want, layout))], H, before, layout)
        assert set(got.steps) == set(want.steps)
        for k, v in want.steps.items():
            assert torch.equal(got.steps[k].reshape(v.shape).to(v.dtype), v), k
        assert torch.equal(got.last_values, want.last_values) and torch.equal(got.last_dones, want.last_dones)
        if layout is not None:
            assert got.rnn_states is not None and want.rnn_states is not None
            for a, b in zip(got.rnn_states, want.rnn_states, strict=True):
                assert torch.equal(a, b)
        if epoch == 0:  # rl-games starts with every flag set; the trainer keeps each agent's last flags
            assert want.steps["dones"][0].all() and 7 in before


# test_tdg_ex_trains_rl_games_update_with_periodic_checkpoints_and_sync_checks is in test_trainer.py, sharing its
# tdg_ex run with the adaptive-rate resume there (one launch instead of two)


class Group:
    """Two trainers' reduction seen from one: the other holds ``other``'s weights."""

    def __init__(self, mine: torch.nn.Module, other: torch.nn.Module) -> None:
        self.model, self.other = mine, other
        self.plan = SimpleNamespace(trainer_group=[0, 1])
        self.gmi_id = 0

    def allreduce(self, t: torch.Tensor, average: bool = False) -> torch.Tensor:
        digest = model_digest(self.other)
        x = torch.tensor([float(int(digest[i:i + 6], 16)) for i in (0, 6)], dtype=torch.float64)
        t += torch.cat([x, x * x])
        return t


def test_check_sync_raises_when_a_trainers_weights_differ() -> None:
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    b.load_state_dict(a.state_dict())
    loop = TrainLoop.__new__(TrainLoop)
    loop.role, loop.plan = Group(a, b), SimpleNamespace(trainer_group=[0, 1])
    loop.check_sync()  # the same weights: nothing to say
    with torch.no_grad():
        b.weight[0, 0] += 1e-6
    with pytest.raises(RuntimeError, match="the trainers' weights diverged"):
        loop.check_sync()


@pytest.mark.parametrize("layout", ["tdg_ex", pytest.param("decoupled_async", marks=pytest.mark.slow)])
def test_score_to_win_stops_an_experience_run(layout: str, tmp_path: Path, no_orphans: None) -> None:
    """The first agent past ``train.score_to_win`` stops every agent; the trainers drain and checkpoint."""
    run_dir = tmp_path / "run"
    r = run_cli(f"layout={layout}", "task=Cartpole", "num_envs=8", "max_iterations=40", "train.horizon_length=8",
                "train.minibatch_size=32", "train.score_to_win=5", "launch.progress=false", f"hydra.run.dir={run_dir}",
                timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((run_dir / "summary.json").read_text())
    plan = Plan.load(run_dir / "plan.yaml")
    assert (run_dir / "score_to_win_reached").exists()
    sent = [s["gmis"][str(g.id)]["rollouts_sent"] for g in plan.gmis if g.has("agent")]
    assert max(sent) < 40  # Cartpole's first episodes last more than 5 steps: the run ends within a few iterations
    assert s["gmis"][str(plan.trainer_group[0])]["checkpoint"]
