"""The learner's update (rl/learner/update.py) on the lazy stand-in device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from gmitest import compose_config
from lazy_graph import compiles, pending_ops

from gmiexp.device import resolve_device
from gmiexp.planner.build import build_plan
from gmiexp.rl.learner.update import Learner, make_optimiser
from gmiexp.rl.rlgames.policy import Spaces, build_model


class OneTrainer:
    """What the Learner needs from its trainer: a model on the device, the Plan, the (here trivial) reduction."""

    def __init__(self, tmp_path: Path) -> None:
        cfg = compose_config("layout=tdg_ex", "task=Cartpole", "gmis_per_gpu=1", "num_envs=8",
                             "train.device=lazy", "train.horizon_length=4", "train.minibatch_size=8",
                             "train.mini_epochs=1")
        self.plan, _ = build_plan(cfg, tmp_path)
        self.gmi_id = self.plan.trainer_group[0]
        self.device = resolve_device("lazy")
        self.model = build_model(self.plan, self.plan.gmi(self.gmi_id), Spaces((4,), False, 2), self.device)
        self.reduced: list[torch.device] = []

    def allreduce(self, t: torch.Tensor, average: bool = False) -> torch.Tensor:
        self.reduced.append(t.device)
        return t


def rollout(horizon: int, n: int) -> dict[str, Any]:
    """One rollout as the channels deliver it: host tensors."""
    g = torch.Generator().manual_seed(0)
    rows = horizon * n
    return {"obs": torch.randn(rows, 4, generator=g), "actions": torch.randint(0, 2, (rows,), generator=g),
            "rewards": torch.ones(rows), "values": torch.randn(rows, generator=g),
            "dones": torch.zeros(rows, dtype=torch.uint8), "neglogp": torch.full((rows,), 0.69)}


def test_update_step_keeps_the_row_count_on_the_gradients_device(tmp_path: Path) -> None:
    role = OneTrainer(tmp_path)
    tr = role.plan.train
    update = Learner(role.model, make_optimiser(role.model, tr), tr, role.allreduce, ppo=True, num_minibatches=2,
                     world=1, leader=True, device=role.device, seed=0, max_frames=32)
    before = [p.detach().cpu().clone() for p in role.model.parameters()]
    n, total, done = update.step([(8, rollout(5, 8))], done=True)  # horizon_length steps and the bootstrap
    assert (n, total, done) == (32, 32, True)  # horizon_length x envs rows trained
    assert any(not torch.equal(b, p.detach().cpu()) for b, p in zip(before, role.model.parameters(), strict=True))
    assert any(d.type == "lazy" for d in role.reduced)  # gradients (and their row count) reduced on the device


def test_every_update_cuts_the_lazy_graph(tmp_path: Path) -> None:
    """Weights and Adam's moments hold data after an update, and a repeated update compiles nothing new.

    Uncut, each optimiser step extended the weights' pending graph, so every update compiled (and kept)
    a longer one: decoupled_async's trainer took 133 s and 7.5 GB for 6 Ant updates on lazy, 1 s on the host.
    """
    role = OneTrainer(tmp_path)
    tr = role.plan.train
    update = Learner(role.model, make_optimiser(role.model, tr), tr, role.allreduce, ppo=True, num_minibatches=2,
                     world=1, leader=True, device=role.device, seed=0, max_frames=96)

    def held() -> list[torch.Tensor]:
        return [*role.model.parameters(), *(s for state in update.opt.state.values() for s in state.values())]

    for _ in range(2):  # the first updates compile every graph an update runs
        update.step([(8, rollout(5, 8))], done=False)
        assert pending_ops(held()) == 0
    seen = compiles()
    update.step([(8, rollout(5, 8))], done=True)
    assert pending_ops(held()) == 0
    assert compiles() == seen
