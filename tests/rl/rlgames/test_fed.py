"""The trainer agent's update equals rl-games' own agent update on the same on-policy rollout.

The reference is rl-games' ``A2CAgent`` / ``DiscreteA2CAgent`` playing a deterministic vec env for one
``train_epoch`` (its own ``play_steps``, GAE, dataset, mini-epochs, scheduler). The rollout it played is read
back (:meth:`Rollout.of_agent`: what an agent GMI sends) and handed to the trainer agent
(:mod:`gmiexp.rl.rlgames.fed`) that starts from the same weights and optimiser state. Both must end with
bit-identical weights, normalisers, Adam state, learning rate and KL: the update is rl-games' own code, so no
op order differs; what is tested is that the rollout crosses over whole (dones' meaning, bootstrap value,
all ``horizon_length`` steps, the recurrent chunk-start states).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from rlgames_parity import RecordingContinuous, RecordingDiscrete, StepEnv, build, params

from gmiexp.rl.rlgames.fed import FedContinuousAgent, FedDiscreteAgent, RolloutSource

CASES = {
    "continuous-regularisation": ("continuous", (5,), {"bound_loss_type": "regularisation"}),
    "continuous-bound": ("continuous", (5,), {"bound_loss_type": "bound"}),
    "discrete": ("discrete", (5,), {}),
    "cnn": ("cnn", (9, 9, 2), {}),
    "lstm": ("lstm", (5,), {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_trainer_update_is_rl_games_update(case: str, tmp_path: Path) -> None:
    kind, shape, extra = CASES[case]
    p = params(tmp_path, kind, **extra)
    continuous = kind in ("continuous", "lstm")
    env = StepEnv(shape, continuous, frames=kind == "cnn")
    ref = build(RecordingContinuous if continuous else RecordingDiscrete, p, env)
    fed = build(FedContinuousAgent if continuous else FedDiscreteAgent, p, RolloutSource(env.get_env_info()))
    fed.model.load_state_dict(ref.model.state_dict())  # the weights a trainer GMI starts from
    for agent in (ref, fed):
        agent.init_tensors()
        agent.obs = agent.env_reset()
        agent.update_epoch()
    ref.train_epoch()  # a first epoch moves the normalisers and Adam: the compared epoch starts mid-run
    fed.model.load_state_dict(ref.model.state_dict())
    fed.optimizer.load_state_dict(copy.deepcopy(ref.optimizer.state_dict()))  # Adam keeps same-device tensors
    fed.last_lr = ref.last_lr
    fed.update_lr(ref.last_lr)
    assert ref.rollout.steps["dones"].any(), "the rollout must cross episode ends"
    ref.update_epoch()
    fed.update_epoch()
    got_ref = ref.train_epoch()
    fed.vec_env.put(ref.rollout)
    got_fed = fed.train_epoch()
    for (k, a), (k2, b) in zip(ref.model.state_dict().items(), fed.model.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(a, b), f"{case}: {k} differs"
    so, sf = ref.optimizer.state_dict()["state"], fed.optimizer.state_dict()["state"]
    assert so.keys() == sf.keys()
    for i in so:
        for name in so[i]:
            assert torch.equal(torch.as_tensor(so[i][name]), torch.as_tensor(sf[i][name])), f"Adam {name} of {i}"
    assert ref.last_lr == fed.last_lr
    assert [float(k) for k in got_ref[-3]] == [float(k) for k in got_fed[-3]]  # the mini-epochs' KL
    if kind in ("continuous", "lstm"):  # rl-games' closed-form KL needs the behaviour's mus and sigmas
        assert "mus" in ref.rollout.steps and "sigmas" in ref.rollout.steps
