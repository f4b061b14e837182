"""The trainer agent (rl-games' own update, :mod:`gmiexp.rl.rlgames.fed`) on the ``lazy`` stand-in device.

A trainer GMI steps no environment, so no vec-env step cuts the lazy device's graph
(:func:`gmiexp.device.step_boundary`) there: the scope of rl-games' gradient step
(:func:`gmiexp.rl.rlgames.lazy.lazy_scalar_guard`, tcg_ex's agent's too) cuts it. Uncut, each minibatch
extended the weights' pending graph and every epoch compiled longer graphs (tdg_ex's trainer took 3, 10 and
27 s for its 3 Ant epochs, and 1.6 GB).
"""

from __future__ import annotations

from pathlib import Path

import torch
from lazy_graph import compiles, pending_ops
from rlgames_parity import RecordingContinuous, StepEnv, build, params

from gmiexp.device import init_lazy
from gmiexp.rl.rlgames.fed import FedContinuousAgent, RolloutSource


def test_every_minibatch_cuts_the_lazy_graph(tmp_path: Path) -> None:
    """Weights and Adam's moments hold data after an epoch, and a repeated epoch compiles nothing new."""
    init_lazy()
    env = StepEnv((5,), True)
    ref = build(RecordingContinuous, params(tmp_path, "continuous"), env)  # plays the rollouts on the host
    ref.init_tensors()
    ref.obs = ref.env_reset()
    fed = build(FedContinuousAgent, params(tmp_path, "continuous", device="lazy"), RolloutSource(env.get_env_info()))
    fed.init_tensors()

    def epoch() -> list[torch.Tensor]:
        ref.update_epoch()
        ref.train_epoch()
        fed.vec_env.put(ref.rollout)
        fed.update_epoch()
        fed.train_epoch()
        return [*fed.model.parameters(), *(s for st in fed.optimizer.state.values() for s in st.values())]

    for _ in range(2):  # the first epochs compile every graph an epoch runs
        assert pending_ops(epoch()) == 0
    seen = compiles()
    assert pending_ops(epoch()) == 0
    assert compiles() == seen
