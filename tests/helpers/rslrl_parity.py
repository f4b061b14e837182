"""One rsl_rl PPO update on a fixed rollout: one process on the whole batch, or one GMI of G on its share.

Used by tests/rl/rslrl/test_update_parity.py in spawned processes (gloo default group, the Plan's reductions).
The rollout (observations, rewards, dones, and the actions the one-process policy sampled) is recorded by the
one-process run; a GMI replays its environments' columns, so both updates see the same samples.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from rsl_rl.models import MLPModel
from tensordict import TensorDict

N, T, OBS = 16, 8, 3  # environments of the whole batch, steps, observation width
EPOCHS = 4


class RecordingMLP(MLPModel):
    """rsl_rl's MLPModel that records every KL mean the adaptive schedule computes (the ``class_name`` hook)."""

    kls: list[float] = []

    def get_kl_divergence(self, old: Any, new: Any) -> torch.Tensor:
        kl = super().get_kl_divergence(old, new)
        RecordingMLP.kls.append(float(kl.mean()))
        return kl


def rollout(seed: int = 3) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    dones = torch.rand(T, N, generator=g) < 0.15
    return {"obs": torch.randn(T + 1, N, OBS, generator=g) * 2 + 1, "rew": torch.randn(T, N, generator=g),
            "done": dones.long(), "time_out": dones & (torch.rand(T, N, generator=g) < 0.5)}


#: RND without its normalisers: the intrinsic reward is then a function of the (broadcast) weights alone
RND = {"weight": 0.5, "learning_rate": 1e-3, "predictor_hidden_dims": [8], "target_hidden_dims": [8],
       "num_outputs": 4}


def build(num_envs: int, group: Any, world: int, rank: int, model_seed: int, rnd: bool = False) -> Any:
    from gmiexp.rl.rslrl.ppo import GMIPPO

    torch.manual_seed(model_seed)
    obs = TensorDict({"policy": torch.zeros(num_envs, OBS)}, batch_size=[num_envs])
    model = {"class_name": RecordingMLP, "hidden_dims": [16, 16], "activation": "elu", "obs_normalization": True}
    groups = {"actor": ["policy"], "critic": ["policy"], **({"rnd_state": ["policy"]} if rnd else {})}
    cfg = {"num_steps_per_env": T, "obs_groups": groups,
           "actor": {**model, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0,
                                                   "std_type": "scalar"}},
           "critic": dict(model),
           "algorithm": {"class_name": GMIPPO, "num_learning_epochs": EPOCHS, "num_mini_batches": 1,
                         "learning_rate": 1e-3, "schedule": "adaptive", "desired_kl": 0.01,
                         "rnd_cfg": dict(RND) if rnd else None,
                         "group": group},
           "multi_gpu": {"global_rank": rank, "local_rank": 0, "world_size": world} if world > 1 else None}
    env = SimpleNamespace(num_envs=num_envs, num_actions=1, unwrapped=SimpleNamespace(step_dt=0.02))
    return GMIPPO.construct_algorithm(obs, env, cfg, "cpu")


def td(x: torch.Tensor) -> TensorDict:
    return TensorDict({"policy": x}, batch_size=[x.shape[0]])


def one_process(rnd: bool) -> tuple[dict[str, torch.Tensor], float, list[float], list[tuple]]:
    """The whole batch in one process: weights, learning rate and KLs after the update, and the sampled rollout."""
    data, sampled = rollout(), []
    alg = build(N, None, 1, 0, model_seed=100, rnd=rnd)
    RecordingMLP.kls = []
    torch.manual_seed(7)
    for t in range(T):
        alg.act(td(data["obs"][t]))
        tr = alg.transition
        sampled.append((tr.actions.clone(), tr.actions_log_prob.clone(), tr.values.clone(),
                        tuple(p.clone() for p in tr.distribution_params)))
        alg.process_env_step(td(data["obs"][t + 1]), data["rew"][t], data["done"][t],
                             {"time_outs": data["time_out"][t]})
    alg.compute_returns(td(data["obs"][T]))
    alg.update()
    return state(alg), alg.learning_rate, list(RecordingMLP.kls), sampled


def share(alg: Any, sampled: list[tuple], rank: int, world: int) -> tuple[dict[str, torch.Tensor], float, list[float]]:
    """GMI ``rank`` of ``world`` replays its columns of the one-process rollout, then updates with the group."""
    data = rollout()
    cols = slice(rank * N // world, (rank + 1) * N // world)
    alg.broadcast_parameters()
    RecordingMLP.kls = []
    for t in range(T):
        alg.act(td(data["obs"][t][cols]))
        tr = alg.transition
        actions, logp, values, params = sampled[t]
        tr.actions, tr.actions_log_prob, tr.values = actions[cols], logp[cols], values[cols]
        tr.distribution_params = tuple(p[cols] for p in params)
        alg.process_env_step(td(data["obs"][t + 1][cols]), data["rew"][t][cols], data["done"][t][cols],
                             {"time_outs": data["time_out"][t][cols]})
    alg.compute_returns(td(data["obs"][T][cols]))
    alg.update()
    return state(alg), alg.learning_rate, list(RecordingMLP.kls)


def state(alg: Any) -> dict[str, torch.Tensor]:
    return {f"{i}.{k}": v.detach().clone() for i, m in enumerate(alg.models()) for k, v in m.state_dict().items()}


def member(rank: int, counts: list[int], port: int, tag: str, out: str, strategies: list[str],
           rnd: bool = False) -> None:
    """One GMI: the one-process reference, then one update per strategy on its share; results to ``out``."""
    import torch.distributed as dist
    from reduction_helpers import plan_of

    from gmiexp.comm.manager import GMIManager
    from gmiexp.comm.reduction import build as build_reduction
    from gmiexp.rl.rslrl.sync import GroupSync

    os.environ["GMIEXP_RUN_TAG"] = tag
    torch.set_num_threads(1)
    plan = plan_of(counts)
    world = plan.world_size
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    ref, ref_lr, ref_kls, sampled = one_process(rnd)
    results: dict[str, Any] = {"ref": ref, "ref_lr": ref_lr, "ref_kls": ref_kls}
    mgr = GMIManager(plan, rank)
    for s in strategies:
        red = build_reduction(s, mgr, plan.trainer_group)
        try:
            alg = build(N // world, GroupSync(mgr, red, rank, world), world, rank, model_seed=100 + rank, rnd=rnd)
            weights, lr, kls = share(alg, sampled, rank, world)
            group_kls = torch.tensor(kls, dtype=torch.float64)
            dist.all_reduce(group_kls)
            results[s] = {"weights": weights, "lr": lr, "kls": (group_kls / world).tolist()}
        finally:
            red.close()
    torch.save(results, Path(out, f"{rank}.pt"))
    dist.destroy_process_group()
