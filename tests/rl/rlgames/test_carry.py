"""A start on another partition hands every environment's rows to the GMI that steps it next, and keeps the streams.

Agents here are stand-ins holding what rl-games' agent holds between epochs (observations, dones, running sums,
recurrent state) over gmiexp's real torch cart-pole; the CLI's re-shapes are in test_reshape_keeps.py.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from gmiexp.envs.cartpole import CartpoleVecEnv
from gmiexp.plan.minibatch import gmi_envs
from gmiexp.rl.rlgames.carry import resume, resume_line
from gmiexp.rl.rlgames.checkpoint import EPISODE_METERS
from gmiexp.rl.rlgames.episodes import RunWideMeter
from gmiexp.rl.rlgames.runstate import gmi_record
from gmiexp.rl.state import set_generator_states

TOTAL, HORIZON, MINIBATCH = 16, 4, 32  # one process: 16 environments, minibatches of 8 environments


def agent(rank: int, world: int, env: Any, seed: int = 0) -> SimpleNamespace:
    """A GMI's agent between epochs, its episode tensors distinct per environment (the env's own numbers)."""
    n = TOTAL // world
    gen = torch.Generator().manual_seed(1000 * world + rank + seed)
    return SimpleNamespace(
        global_rank=rank, world_size=world, ppo_device=torch.device("cpu"), horizon_length=HORIZON,
        minibatch_size=MINIBATCH // world, obs={"obs": torch.randn(n, 4, generator=gen)},
        dones=torch.randint(0, 2, (n,), generator=gen, dtype=torch.uint8),
        current_rewards=torch.rand(n, 1, generator=gen), current_shaped_rewards=torch.rand(n, 1, generator=gen),
        current_lengths=torch.randint(0, 50, (n,), generator=gen).float(), is_rnn=True,
        rnn_states=(torch.randn(1, n, 3, generator=gen), torch.randn(1, n, 3, generator=gen)), vec_env=env,
        model=nn.Linear(4, 2), epoch_num=2, frame=640, last_lr=1e-3, entropy_coef=0.0,
        **{name: RunWideMeter(1, 10, None) for name in EPISODE_METERS})


def cartpoles(world: int, seed: int) -> list[CartpoleVecEnv]:
    """``world`` GMIs' simulators, stepped so that every environment is somewhere of its own."""
    envs = []
    for r in range(world):
        env = CartpoleVecEnv(TOTAL // world, seed=seed + r)
        env.reset()
        for i in range(7):
            env.step(torch.tensor([(i * 3 + k) % 2 for k in range(env.num_envs)]))
        envs.append(env)
    return envs


def run_of(agents: list[SimpleNamespace]) -> dict[str, Any]:
    return {"segment": 0, "world_size": len(agents), "gmis": [gmi_record(a) for a in agents]}


def rows(a: SimpleNamespace) -> dict[str, torch.Tensor]:
    """Every per-environment thing of a GMI, environments in the first dimension."""
    sim = a.vec_env.get_env_state()
    return {"state": sim["state"], "steps": sim["steps"], "obs": a.obs["obs"], "dones": a.dones,
            "current_rewards": a.current_rewards, "current_shaped_rewards": a.current_shaped_rewards,
            "current_lengths": a.current_lengths, "rnn_h": a.rnn_states[0][0], "rnn_c": a.rnn_states[1][0]}


def one_process(agents: list[SimpleNamespace]) -> dict[str, torch.Tensor]:
    """The GMIs' rows in one process's environment order (docs/equivalence.md)."""
    world = len(agents)
    out: dict[str, torch.Tensor] = {}
    for name in rows(agents[0]):
        parts = [rows(a)[name] for a in agents]
        whole = torch.empty((TOTAL, *parts[0].shape[1:]), dtype=parts[0].dtype)
        for r, part in enumerate(parts):
            whole[gmi_envs(r, world, TOTAL // world, MINIBATCH // world // HORIZON)] = part
        out[name] = whole
    return out


def reshape(agents: list[SimpleNamespace], world: int, seed: int) -> tuple[list[SimpleNamespace], list[dict]]:
    """``agents``' run started on ``world`` GMIs; each report has the generator its simulator had before."""
    run = run_of(agents)
    new = [agent(r, world, env, seed=seed) for r, env in enumerate(cartpoles(world, seed))]
    gens = [a.vec_env.get_env_state()["generator"] for a in new]
    return new, [resume(a, run, r, world, seed=50 + r) | {"generator": g}
                 for r, (a, g) in enumerate(zip(new, gens, strict=True))]


@pytest.mark.parametrize(("frm", "to"), [(1, 2), (2, 1), (2, 4), (4, 2)])
def test_every_environment_and_its_running_episode_goes_to_the_gmi_that_steps_it_next(frm: int, to: int) -> None:
    old = [agent(r, frm, env) for r, env in enumerate(cartpoles(frm, seed=3))]
    new, reports = reshape(old, to, seed=100)
    want, got = one_process(old), one_process(new)
    for name in want:
        assert torch.equal(got[name], want[name]), f"{name}: the environments' rows moved to the wrong GMI"
    for rep in reports:
        assert rep["reshaped"] == {"from": frm, "to": to}
        assert (rep["simulator"], rep["episodes_cut"], rep["frames_cut"]) == (True, 0, 0)
    for a, rep in zip(new, reports, strict=True):  # each new simulator keeps its own generator (its segment's)
        assert torch.equal(a.vec_env.get_env_state()["generator"], rep["generator"])
    back, _ = reshape(new, frm, seed=200)
    assert all(torch.equal(one_process(back)[name], want[name]) for name in want)  # and round trip


def draws() -> tuple[float, float, float]:
    return float(torch.rand(1)), float(np.random.rand()), random.random()


def seed_all(seed: int) -> None:
    torch.manual_seed(seed), np.random.seed(seed), random.seed(seed)


def test_gmi_r_goes_on_with_old_gmi_r_s_streams_and_a_new_gmi_with_its_process_s() -> None:
    old = [agent(r, 2, env) for r, env in enumerate(cartpoles(2, seed=3))]
    records = []
    for r, a in enumerate(old):
        seed_all(11 + r)  # each old GMI's process somewhere of its own
        records.append(gmi_record(a))
    set_generator_states(records[0]["generators"], "cpu")
    want = draws()  # what old GMI 0 would have drawn next
    seed_all(99)  # the new process, seeded for its segment
    (env,) = cartpoles(1, seed=9)
    rep = resume(agent(0, 1, env), {"segment": 0, "world_size": 2, "gmis": records}, 0, 1, seed=99)
    assert draws() == want and rep["restored"] and rep["streams"] == "GMI 0's"
    new, run = agent(1, 2, cartpoles(2, seed=9)[1]), run_of([agent(0, 1, env)])
    seed_all(77)
    mine = draws()  # 1 -> 2: GMI 1 had no GMI 1 before it, and keeps its process's streams (its segment's)
    seed_all(77)
    rep = resume(new, run, 1, 2, seed=77)
    assert draws() == mine and not rep["restored"] and rep["streams"] == "seed 77"


class Pool:
    """A simulator that cannot save its state (envpool's case)."""

    num_envs = 8

    def get_env_state(self) -> None:
        return None

    def set_env_state(self, env_state: Any) -> None:
        raise AssertionError("nothing to set")


def test_a_simulator_whose_state_does_not_split_cuts_the_episodes_in_progress_and_counts_their_frames() -> None:
    old = [agent(r, 2, Pool()) for r in range(2)]
    in_progress = sum(int((a.current_lengths > 0).sum()) for a in old)
    frames = sum(int(a.current_lengths.sum()) for a in old)
    assert in_progress > 0 and frames > 0
    fresh = agent(0, 1, Pool())
    lengths = fresh.current_lengths.clone()
    rep = resume(fresh, run_of(old), 0, 1, seed=5)
    assert (rep["simulator"], rep["episodes_cut"], rep["frames_cut"], rep["streams"]) == \
        (False, in_progress, frames, "GMI 0's")
    assert torch.equal(fresh.current_lengths, lengths)  # nothing carried into the fresh episodes
    assert resume_line(rep, epoch=4, segment=2) == (
        "gmiexp: resumed after epoch 4 (segment 2) on another partition (2 -> 1 GMIs): generators carried over, "
        f"but the simulator cannot save its state per environment; {in_progress} episodes in progress were cut "
        f"({frames} frames; the environments start new ones from segment 2's seeds)")
    older = run_of(old)
    for r in older["gmis"]:  # a checkpoint of an older gmiexp: its records do not name their environments
        del r["envs"], r["frames_in_progress"]
    (env,) = cartpoles(1, seed=9)
    rep = resume(agent(0, 1, env), older, 0, 1, seed=5)
    assert (rep["simulator"], rep["episodes_cut"], rep["frames_cut"]) == (False, in_progress, None)
