"""G GMIs fed one batch against one process on it: rl-games' own agent, and gmiexp's GMI agent on shares.

Used by tests/rl/rlgames/test_group_update.py in spawned processes (gloo default group, the Plan's reduction).
Every member first runs the reference itself (deterministic, so every member has the same): rl-games' own
``A2CAgent`` / ``DiscreteA2CAgent`` playing :class:`rlgames_parity.StepEnv` with ``N`` environments for ``EPOCHS``
epochs, its rollouts recorded. Then each member is GMI ``rank`` of ``world``: gmiexp's ``GMISyncMixin`` over
rl-games' agent, fed (``FedRollouts``) its environments' columns of each recorded rollout, the environments
:func:`gmiexp.plan.minibatch.gmi_envs` assigns it, and trained for the same epochs from the same weights.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from rl_games.algos_torch import a2c_continuous, a2c_discrete
from rl_games.common.algo_observer import DefaultAlgoObserver
from rlgames_parity import Recording, StepEnv, build, params

from gmiexp.plan.minibatch import gmi_envs
from gmiexp.rl.rlgames.agent import GMISyncMixin
from gmiexp.rl.rlgames.fed import FedRollouts, Rollout, RolloutSource

N, H, EPOCHS = 16, 8, 3  # environments of the whole batch, horizon, epochs
MINIBATCHES = 4  # of the whole batch: a GMI's minibatch is N // MINIBATCHES // world environments

#: (kind, observation shape, central value state width, extra config)
CASES: dict[str, tuple[str, tuple[int, ...], int, dict[str, Any]]] = {
    "continuous": ("continuous", (5,), 0, {}),
    "discrete": ("discrete", (5,), 0, {}),
    "central-value": ("continuous", (5,), 6, {}),
    "lstm": ("lstm", (5,), 0, {}),
}


class RefContinuous(Recording, a2c_continuous.A2CAgent):
    pass


class RefDiscrete(Recording, a2c_discrete.DiscreteA2CAgent):
    pass


class GroupContinuous(GMISyncMixin, FedRollouts, a2c_continuous.A2CAgent):
    """gmiexp's GMI agent (what tcg_ex runs) fed recorded rollouts."""


class GroupDiscrete(GMISyncMixin, FedRollouts, a2c_discrete.DiscreteA2CAgent):
    pass


def case_params(tmp: Path, case: str, world: int) -> dict[str, Any]:
    """The case's rl-games params for a GMI of ``world`` (``world=1``: one process): 4 minibatches, 2 mini-epochs."""
    kind, _, states, extra = CASES[case]
    rows = N * H // world
    p = params(tmp, kind, **extra)
    p["config"].update(num_actors=N // world, horizon_length=H, minibatch_size=rows // MINIBATCHES, mini_epochs=2,
                       normalize_input=True, normalize_value=True, normalize_advantage=True)
    if states:
        p["config"]["central_value_config"] = {
            "minibatch_size": rows // MINIBATCHES, "mini_epochs": 2, "learning_rate": 1e-3, "lr_schedule": None,
            "kl_threshold": 0.008, "clip_value": True, "normalize_input": True, "truncate_grads": True,
            "grad_norm": 1.0, "e_clip": 0.2,
            "network": {"name": "actor_critic", "central_value": True,
                        "mlp": {"units": [16, 8], "activation": "elu", "d2rl": False,
                                "initializer": {"name": "default"}, "regularizer": {"name": "None"}}}}
    return p


def env_for(case: str, n: int) -> StepEnv:
    kind, shape, states, _ = CASES[case]
    return StepEnv(shape, kind in ("continuous", "lstm"), n=n, states=states)


def reference(case: str, tmp: Path) -> tuple[dict[str, torch.Tensor], list[Rollout], list[dict[str, torch.Tensor]],
                                               list[float]]:
    """rl-games' own agent on all ``N`` environments: start weights, the rollouts, weights and lr after each epoch."""
    kind = CASES[case][0]
    env = env_for(case, N)
    ref = build(RefDiscrete if kind == "discrete" else RefContinuous, case_params(tmp / "ref", case, 1), env)
    start = state(ref)
    ref.init_tensors()
    ref.obs = ref.env_reset()
    rollouts, after, lrs = [], [], []
    for _ in range(EPOCHS):
        ref.update_epoch()
        ref.train_epoch()
        rollouts.append(ref.rollout)
        after.append(state(ref))
        lrs.append(float(ref.last_lr))
    ref.writer.close()  # rl-games never closes its TensorBoard writer
    return start, rollouts, after, lrs


def columns(r: Rollout, envs: list[int]) -> Rollout:
    """The rollout of the environments ``envs`` (in that order)."""
    idx = torch.tensor(envs)
    steps = {k: v[:, idx] for k, v in r.steps.items()}
    states = [s[:, :, idx] for s in r.rnn_states] if r.rnn_states is not None else None
    return Rollout(steps, r.last_values[idx], r.last_dones[idx], states)


def state(agent: Any) -> dict[str, torch.Tensor]:
    out = {f"model.{k}": v.detach().clone() for k, v in agent.model.state_dict().items()}
    if agent.has_central_value:
        out.update({f"cv.{k}": v.detach().clone() for k, v in agent.central_value_net.model.state_dict().items()})
    return out


def load(agent: Any, weights: dict[str, torch.Tensor]) -> None:
    agent.model.load_state_dict({k[6:]: v for k, v in weights.items() if k.startswith("model.")})
    if agent.has_central_value:
        agent.central_value_net.model.load_state_dict({k[3:]: v for k, v in weights.items() if k.startswith("cv.")})


def gmi_agent(case: str, tmp: Path, ctx: Any, world: int) -> Any:
    kind = CASES[case][0]
    env = env_for(case, N // world)
    p = copy.deepcopy(case_params(tmp, case, world))
    p["config"]["env_info"], p["config"]["vec_env"] = env.get_env_info(), RolloutSource(env.get_env_info())
    p["config"]["features"] = {"observer": DefaultAlgoObserver()}
    torch.manual_seed(0)
    return (GroupDiscrete if kind == "discrete" else GroupContinuous)(base_name="run", params=p, ctx=ctx)


def member(rank: int, world: int, port: int, tag: str, out: str, case: str, strategy: str) -> None:
    """GMI ``rank`` of ``world``: the reference, then its share of every epoch; results to ``out``."""
    import torch.distributed as dist
    from reduction_helpers import plan_of

    from gmiexp.comm.manager import GMIManager
    from gmiexp.comm.reduction import build as build_reduction

    os.environ["GMIEXP_RUN_TAG"] = tag
    torch.set_num_threads(1)
    tmp = Path(out) / f"gmi{rank}"
    start, rollouts, ref_after, ref_lrs = reference(case, tmp)
    plan = plan_of([world])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    mgr = GMIManager(plan, rank)
    red = build_reduction(strategy, mgr, plan.trainer_group)
    try:
        ctx = SimpleNamespace(plan=plan, gmi=plan.gmi(rank), mgr=mgr, reduction=red, status=None)
        agent = gmi_agent(case, tmp, ctx, world)
        load(agent, start)
        agent.init_tensors()
        agent.obs = agent.env_reset()
        envs = gmi_envs(rank, world, N // world, N // MINIBATCHES // world)
        after, lrs, kls = [], [], []
        for r in rollouts:
            agent.update_epoch()
            agent.vec_env.put(columns(r, envs))
            result = agent.train_epoch()
            after.append(state(agent))
            lrs.append(float(agent.last_lr))
            kls.append([float(k) for k in result[-3]])
        if agent.writer is not None:
            agent.writer.close()
        torch.save({"ref": ref_after, "ref_lrs": ref_lrs, "after": after, "lrs": lrs, "kls": kls},
                   Path(out, f"{rank}.pt"))
    finally:
        red.close()
        dist.destroy_process_group()
