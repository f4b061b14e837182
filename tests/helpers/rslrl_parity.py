"""One rsl_rl PPO update on a fixed rollout: one process on the whole batch, or one GMI of G on its share.

Used by tests/rl/rslrl/test_update_parity.py in spawned processes (gloo default group, the Plan's reductions).
The rollout (observations, rewards, dones, and the actions the one-process policy sampled) is recorded by the
one-process run; a GMI replays its environments' columns (:func:`gmiexp.rl.rslrl.minibatch.gmi_columns`), so both
updates see the same samples. The one process is rsl_rl's own PPO; before its update the global generator is
seeded with the run's seed, so its ``randperm`` is the permutation the GMIs draw (from a generator seeded alike).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from rsl_rl.models import MLPModel, RNNModel
from tensordict import TensorDict

N, T, OBS = 16, 8, 3  # environments of the whole batch, steps, observation width
EPOCHS = 4
SEED = 11  # the run's seed: the GMIs' minibatch permutation is drawn from it


@dataclass(frozen=True)
class Case:
    """What the update uses: minibatches, observation normalisers, RND (with its normalisers), symmetry."""

    minibatches: int = 4
    obs_normalization: bool = True
    rnd: bool = True
    symmetry: bool = True
    per_minibatch: bool = False  # normalize_advantage_per_mini_batch
    recurrent: bool = False  # GRU actor and critic (rsl_rl's recurrent minibatches)
    mixed_precision: bool = False  # rsl_rl 5.5's use_mixed_precision: the update's forward passes in bfloat16

    @property
    def updates(self) -> int:
        return EPOCHS * self.minibatches


def recording(base: type) -> type:
    """rsl_rl's ``base`` model recording the sum and count of every KL the adaptive schedule computes (``class_name``).

    Into ``Recorder.kls``; a GMI's stand-in row (no row of its own in a minibatch: ``group.weight`` 0) is not counted.
    """

    class Recording(base):  # type: ignore[misc, valid-type]
        def get_kl_divergence(self, old: Any, new: Any) -> torch.Tensor:
            kl = super().get_kl_divergence(old, new)
            counts = Recorder.group is None or Recorder.group.weight != 0
            Recorder.kls.append((float(kl.double().sum()), kl.numel()) if counts else (0.0, 0))
            return kl

    return Recording


class Recorder:
    kls: list[tuple[float, int]] = []
    group: Any = None


RecordingMLP, RecordingRNN = recording(MLPModel), recording(RNNModel)


FLIP = torch.tensor([1.0, -1.0, -1.0])


def mirror(env: Any, obs: TensorDict | None = None, actions: torch.Tensor | None = None) -> tuple:
    """A symmetry of the point task: the last two observations and the action change sign (rsl_rl's signature)."""
    aug_obs = None if obs is None else torch.cat([obs, obs.apply(lambda x: x * FLIP.to(x.device))])
    aug_actions = None if actions is None else torch.cat([actions, -actions])
    return aug_obs, aug_actions


def rollout(seed: int = 3) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    dones = torch.rand(T, N, generator=g) < 0.15
    return {"obs": torch.randn(T + 1, N, OBS, generator=g) * 2 + 1, "rew": torch.randn(T, N, generator=g),
            "done": dones.long(), "time_out": dones & (torch.rand(T, N, generator=g) < 0.5)}


def rnd_cfg() -> dict:
    """RND with both of its normalisers: the intrinsic reward depends on statistics updated at every step."""
    return {"weight": 0.5, "learning_rate": 1e-3, "predictor_hidden_dims": [8], "target_hidden_dims": [8],
            "num_outputs": 4, "state_normalization": True, "reward_normalization": True}


def build(num_envs: int, group: Any, world: int, rank: int, model_seed: int, case: Case) -> Any:
    from gmiexp.rl.rslrl.ppo import GMIPPO

    torch.manual_seed(model_seed)
    obs = TensorDict({"policy": torch.zeros(num_envs, OBS)}, batch_size=[num_envs])
    model = {"class_name": RecordingMLP, "hidden_dims": [16, 16], "activation": "elu",
             "obs_normalization": case.obs_normalization}
    if case.recurrent:
        model.update(class_name=RecordingRNN, rnn_type="gru", rnn_hidden_dim=8)
    groups = {"actor": ["policy"], "critic": ["policy"], **({"rnd_state": ["policy"]} if case.rnd else {})}
    symmetry = {"use_data_augmentation": True, "use_mirror_loss": True, "mirror_loss_coeff": 0.5,
                "data_augmentation_func": mirror}
    cfg = {"num_steps_per_env": T, "obs_groups": groups,
           "actor": {**model, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0,
                                                   "std_type": "scalar"}},
           "critic": dict(model),
           "algorithm": {"class_name": GMIPPO, "num_learning_epochs": EPOCHS, "num_mini_batches": case.minibatches,
                         "learning_rate": 1e-3, "schedule": "adaptive", "desired_kl": 0.01,
                         "normalize_advantage_per_mini_batch": case.per_minibatch,
                         "rnd_cfg": rnd_cfg() if case.rnd else None,
                         "symmetry_cfg": symmetry if case.symmetry else None,
                         **({"use_mixed_precision": True} if case.mixed_precision else {}),
                         "group": group},
           "multi_gpu": {"global_rank": rank, "local_rank": 0, "world_size": world} if world > 1 else None}
    env = SimpleNamespace(num_envs=num_envs, num_actions=1, unwrapped=SimpleNamespace(step_dt=0.02))
    return GMIPPO.construct_algorithm(obs, env, cfg, "cpu")


def td(x: torch.Tensor) -> TensorDict:
    return TensorDict({"policy": x}, batch_size=[x.shape[0]])


def one_process(case: Case) -> tuple[dict[str, torch.Tensor], float, list[float], list[tuple]]:
    """The whole batch in one process: weights, learning rate and KLs after the update, and the sampled rollout."""
    data, sampled = rollout(), []
    alg = build(N, None, 1, 0, model_seed=100, case=case)
    Recorder.kls, Recorder.group = [], None
    torch.manual_seed(7)
    with torch.inference_mode():  # as rsl_rl's runner collects
        for t in range(T):
            alg.act(td(data["obs"][t]))
            tr = alg.transition
            sampled.append((tr.actions.clone(), tr.actions_log_prob.clone(), tr.values.clone(),
                            tuple(p.clone() for p in tr.distribution_params)))
            alg.process_env_step(td(data["obs"][t + 1]), data["rew"][t], data["done"][t],
                                 {"time_outs": data["time_out"][t]})
        alg.compute_returns(td(data["obs"][T]))
    torch.manual_seed(SEED)  # rsl_rl's randperm: the permutation the GMIs draw from the run's seed
    alg.update()
    return state(alg), alg.learning_rate, [s / n for s, n in Recorder.kls], sampled


def share(alg: Any, sampled: list[tuple], rank: int, shares: list[int]) -> tuple[dict[str, torch.Tensor], float, list]:
    """GMI ``rank`` replays its columns of the one-process rollout, then updates with the group."""
    from gmiexp.rl.rslrl.minibatch import gmi_columns

    data = rollout()
    cols = gmi_columns(rank, shares, alg.num_mini_batches)
    alg.broadcast_parameters()
    Recorder.kls, Recorder.group = [], alg.group
    with torch.inference_mode():
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
    return state(alg), alg.learning_rate, list(Recorder.kls)


def state(alg: Any) -> dict[str, torch.Tensor]:
    return {f"{i}.{k}": v.detach().clone() for i, m in enumerate(alg.models()) for k, v in m.state_dict().items()}


def member(rank: int, counts: list[int], port: int, tag: str, out: str, strategies: list[str], case: Case,
           shares: list[int]) -> None:
    """One GMI: the one-process reference, then one update per strategy on its share; results to ``out``.

    ``shares``: each GMI's environments (they sum to ``N``).
    """
    import torch.distributed as dist
    from reduction_helpers import plan_of

    from gmiexp.comm.manager import GMIManager
    from gmiexp.comm.reduction import build as build_reduction
    from gmiexp.rl.rslrl.sync import GroupSync

    os.environ["GMIEXP_RUN_TAG"] = tag
    torch.set_num_threads(1)
    plan = plan_of(counts)
    world = plan.world_size
    # one process on the whole batch, before the group exists: rsl_rl 5.5's normaliser all-reduces its moments
    # whenever torch.distributed is initialised, which would count every GMI's copy of the reference
    ref, ref_lr, ref_kls, sampled = one_process(case)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    results: dict[str, Any] = {"ref": ref, "ref_lr": ref_lr, "ref_kls": ref_kls}
    mgr = GMIManager(plan, rank)
    for s in strategies:
        red = build_reduction(s, mgr, plan.trainer_group)
        try:
            group = GroupSync(mgr, red, rank, world, seed=SEED)
            alg = build(shares[rank], group, world, rank, model_seed=100 + rank, case=case)
            weights, lr, kls = share(alg, sampled, rank, shares)
            # the schedule's KL of minibatch i: the mean over the union of the GMIs' rows of minibatch i
            sums = torch.tensor([[s_, n_] for s_, n_ in kls], dtype=torch.float64)
            dist.all_reduce(sums)
            results[s] = {"weights": weights, "lr": lr, "kls": (sums[:, 0] / sums[:, 1]).tolist()}
        finally:
            red.close()
    torch.save(results, Path(out, f"{rank}.pt"))
    dist.destroy_process_group()
