"""Translate the Plan into an rl-games ``params`` dict (what an rl-games YAML would hold)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gmiexp.config import TaskConfig, TrainConfig
from gmiexp.plan import GMI, Plan

ENV_NAME = "gmiexp"


def fit_minibatch(batch: int, wanted: int) -> int:
    """Largest divisor of ``batch`` not above ``wanted`` (rl-games asserts batch % minibatch == 0)."""
    m = max(1, min(batch, wanted))
    while batch % m:
        m -= 1
    return m


def network(task: TaskConfig, activation: str) -> dict[str, Any]:
    if task.continuous:
        space = {"continuous": {
            "mu_activation": task.mu_activation, "sigma_activation": task.sigma_activation,
            "mu_init": dict(task.mu_init),
            "sigma_init": dict(task.sigma_init),
            "fixed_sigma": task.fixed_sigma,
        }}
    else:
        space = {"discrete": {}}
    net: dict[str, Any] = {
        "name": "actor_critic",
        "separate": task.separate,
        "space": space,
        "mlp": {"units": list(task.mlp_units), "activation": activation, "d2rl": False,
                "initializer": dict(task.mlp_initializer), "regularizer": {"name": "None"}},
    }
    if task.cnn:
        net["cnn"] = dict(task.cnn)
    if task.rnn:
        net["rnn"] = dict(task.rnn)
    return net


def central_value_config(task: TaskConfig, tr: TrainConfig, minibatch_size: int,
                         lr_schedule: str | None) -> dict[str, Any]:
    """rl-games' central value network (asymmetric critic on the env's ``states``), sized like the policy."""
    return {
        "minibatch_size": minibatch_size, "mini_epochs": tr.mini_epochs, "learning_rate": tr.learning_rate,
        "lr_schedule": lr_schedule, "kl_threshold": tr.kl_threshold, "clip_value": tr.clip_value,
        "normalize_input": tr.normalize_input, "truncate_grads": tr.truncate_grads,
        "grad_norm": tr.grad_norm, "e_clip": tr.e_clip,
        "network": {"name": "actor_critic", "central_value": True,
                    "mlp": {"units": list(task.mlp_units), "activation": tr.activation, "d2rl": False,
                            "initializer": {"name": "default"}, "regularizer": {"name": "None"}}},
    }


def build_params(plan: Plan, gmi: GMI, num_envs: int | None = None, device: str = "cpu",
                 train_dir: Path | None = None) -> dict[str, Any]:
    """rl-games params for one GMI (``num_envs`` overrides the GMI's, for the single-process baseline)."""
    task, tr = plan.task, plan.train
    n = num_envs if num_envs is not None else gmi.num_envs
    batch = tr.horizon_length * n
    lr_schedule = None if tr.lr_schedule == "identity" else tr.lr_schedule
    config: dict[str, Any] = {
        "name": task.name,
        "full_experiment_name": "run",
        "env_name": ENV_NAME,
        "multi_gpu": False,  # rl-games would init NCCL itself; gmiexp owns the process group
        "ppo": True,
        "device": device,
        "mixed_precision": tr.mixed_precision,
        "torch_compile": tr.torch_compile,
        "normalize_input": tr.normalize_input,
        "normalize_value": tr.normalize_value,
        "normalize_advantage": tr.normalize_advantage,
        "value_bootstrap": tr.value_bootstrap,
        "num_actors": n,
        "reward_shaper": {"scale_value": task.reward_scale},
        "gamma": tr.gamma,
        "tau": tr.tau,
        "learning_rate": tr.learning_rate,
        "lr_schedule": lr_schedule,
        "kl_threshold": tr.kl_threshold,
        "max_epochs": plan.max_iterations,
        "save_best_after": 1,
        "save_frequency": tr.save_frequency,
        "print_stats": tr.print_stats,
        "grad_norm": tr.grad_norm,
        "entropy_coef": tr.entropy_coef,
        "truncate_grads": tr.truncate_grads,
        "e_clip": tr.e_clip,
        "horizon_length": tr.horizon_length,
        "minibatch_size": fit_minibatch(batch, tr.minibatch_size),
        "mini_epochs": tr.mini_epochs,
        "critic_coef": tr.critic_coef,
        "clip_value": tr.clip_value,
        "seq_length": 4,
        "check_sync": tr.check_sync,
        "env_config": {"seed": plan.seed + 1000 * gmi.id},
        # GMI 0 owns the run's rl-games directory (logs, checkpoints); the others get scratch space
        "train_dir": str(train_dir or (Path(plan.run_dir) / "rl_games" if gmi.id == 0
                                       else Path(plan.run_dir) / "gmis" / str(gmi.id) / "rl_games")),
    }
    if task.continuous:
        config["bounds_loss_coef"] = tr.bounds_loss_coef
        config["bound_loss_type"] = tr.bound_loss_type
    config["use_smooth_clamp"] = tr.use_smooth_clamp
    if tr.score_to_win is not None:
        config["score_to_win"] = tr.score_to_win
    if task.central_value:
        config["central_value_config"] = central_value_config(task, tr, config["minibatch_size"], lr_schedule)
    return {
        "seed": plan.seed,
        "torch_threads": gmi.torch_threads,
        "algo": {"name": "a2c_continuous" if task.continuous else "a2c_discrete"},
        "model": {"name": "continuous_a2c_logstd" if task.continuous else "discrete_a2c"},
        "network": network(task, tr.activation),
        "config": config,
    }


def policy_param_count(plan: Plan) -> int:
    """Parameters every gradient reduction moves (Table 2's gradient size), as rl-games builds them.

    The policy (actor, critic, a separate critic's own tower) and, with ``task.central_value``, rl-games'
    central value network.

    Counted from the network spec rather than by building it, so ``mode=plan`` imports neither rl-games nor
    torch; ``tests/rl/rlgames/test_params.py`` holds the count equal to rl-games' ``ModelBuilder`` on every task.
    """
    from gmiexp.envs import task_dims

    obs, act = task_dims(plan.task)
    net = network(plan.task, plan.train.activation)
    sizes = [obs, *net["mlp"]["units"]]
    trunk = sum(i * o + o for i, o in zip(sizes, sizes[1:], strict=False))
    last = sizes[-1]
    towers = 2 if net["separate"] else 1  # a separate critic repeats the MLP
    value = last + 1
    head = last * act + act  # mu (continuous) or logits (discrete)
    sigma = act if plan.task.continuous else 0  # fixed_sigma: one learnt log-std per action
    return towers * trunk + value + head + sigma + central_value_param_count(plan)


def central_value_param_count(plan: Plan) -> int:
    """Parameters of rl-games' central value network (an MLP on the simulator's ``states``, one value); 0 without."""
    from gmiexp.envs import task_state_dim

    if not plan.task.central_value:
        return 0
    state = task_state_dim(plan.task)
    if state is None:
        return 0  # the simulator has no states: rl-games gets none and builds no central value net
    sizes = [state, *plan.task.mlp_units]
    return sum(i * o + o for i, o in zip(sizes, sizes[1:], strict=False)) + sizes[-1] + 1
