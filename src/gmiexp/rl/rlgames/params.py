"""Translate the Plan into an rl-games ``params`` dict (what an rl-games YAML would hold).

The keys rl-games and gmiexp share are written from the table the import reads too
(:mod:`gmiexp.config.rlgames_keys`); here are only the keys gmiexp sets itself (names, device, directories, seeds).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gmiexp.config import TaskConfig, TrainConfig
from gmiexp.config.rlgames_keys import ALGO, MODEL, export
from gmiexp.envs import task_spaces, task_state_dim
from gmiexp.envs.spaces import TaskSpaces
from gmiexp.plan import GMI, Plan
from gmiexp.plan.minibatch import fit_minibatch

ENV_NAME = "gmiexp"


def lookup(sections: dict[str, Any], own: dict[str, Any]) -> Callable[[str], Any]:
    """The value of a dotted gmiexp key (``train.gamma``: ``sections["train"].gamma``), from ``own`` if there."""
    def value(dst: str) -> Any:
        if dst in own:
            return own[dst]
        group, _, name = dst.rpartition(".")
        return getattr(sections[group], name)
    return value


def action_kind(task: TaskConfig) -> str:
    """The simulator's action kind: continuous, discrete or multi_discrete (``task.continuous`` must match it)."""
    return task_spaces(task).action


def network(task: TaskConfig, activation: str, kind: str | None = None) -> dict[str, Any]:
    """rl-games' ``params.network`` for the task (``kind``: its action kind, asked of the simulator when None)."""
    kind = kind or action_kind(task)
    net: dict[str, Any] = {"name": "actor_critic",
                           **export(lookup({"task": task}, {"train.activation": activation}), "network",
                                    continuous=kind == "continuous")}
    if kind != "continuous":
        net["space"] = {kind: {}}
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
    kind = action_kind(task)
    n = num_envs if num_envs is not None else gmi.num_envs
    value = lookup({"": plan, "task": task, "train": tr}, {  # this GMI's own
        "num_envs": n, "train.torch_threads": gmi.torch_threads, "seed": gmi.seed,
        "train.minibatch_size": fit_minibatch(tr.horizon_length * n, tr.minibatch_size)})
    own: dict[str, Any] = {
        "full_experiment_name": "run",
        "env_name": ENV_NAME,
        "multi_gpu": False,  # rl-games would init NCCL itself; gmiexp owns the process group
        "device": device,
        "save_best_after": 1,  # train.rlgames_config may set rl-games' own (an imported file's)
        "check_sync": tr.check_sync,
        "env_config": {"seed": gmi.env_seed},  # gmiexp.planner.seeds
        # GMI 0 owns the run's rl-games directory (logs, checkpoints); the others get scratch space
        "train_dir": str(train_dir or (Path(plan.run_dir) / "rl_games" if gmi.id == 0
                                       else Path(plan.run_dir) / "gmis" / str(gmi.id) / "rl_games")),
    }
    config = {**own, **export(value, "config", continuous=task.continuous)}
    if task.central_value:
        config["central_value_config"] = central_value_config(task, tr, config["minibatch_size"],
                                                              config["lr_schedule"])
    return {
        **export(value, "", continuous=task.continuous),  # seed, torch_threads
        "algo": {"name": ALGO[kind]},
        "model": {"name": MODEL[kind]},
        "network": network(task, tr.activation, kind),
        "config": config,
    }


def policy_param_count(plan: Plan) -> int:
    """Parameters every gradient reduction moves (Table 2's gradient size), as rl-games builds them.

    The policy (actor, critic, a separate critic's own tower) and, with ``task.central_value``, rl-games'
    central value network.

    Counted from the network spec as rl-games' ``A2CBuilder.Network`` lays it out (conv stack, recurrent layer,
    MLP, heads; a ``separate`` critic repeats the towers) rather than by building it, so ``mode=plan`` imports
    neither rl-games nor torch; ``tests/rl/rlgames/test_params.py`` holds the count equal to rl-games'
    ``ModelBuilder`` on every task and network kind.
    """
    return (network_param_count(network(plan.task, plan.train.activation), task_spaces(plan.task))
            + central_value_param_count(plan))


def _linear(i: int, o: int) -> int:
    return i * o + o


def conv_stack(cnn: dict[str, Any], shape: tuple[int, ...]) -> tuple[int, int]:
    """(parameters, flattened output size) of rl-games' conv stack on an input of ``shape``."""
    kind = cnn.get("type", "conv2d")
    if kind not in ("conv2d", "conv2d_flatten", "conv1d"):
        raise ValueError(f"no parameter count for rl-games cnn type {kind!r}")
    if cnn.get("permute_input", True) and len(shape) == 3:  # rl-games' shape_whc_to_cwh
        shape = (shape[2], shape[0], shape[1])
    channels, spatial = shape[0], list(shape[1:])
    params = 0
    for conv in cnn["convs"]:
        k, s, p = int(conv["kernel_size"]), int(conv["strides"]), int(conv["padding"])
        filters = int(conv["filters"])
        params += channels * filters * k ** len(spatial) + filters
        spatial = [(d + 2 * p - k) // s + 1 for d in spatial]
        channels = filters
    return params, channels * math.prod(spatial)


def _rnn(name: str, inp: int, units: int, layers: int) -> int:
    gates = {"lstm": 4, "gru": 3}[name]
    return sum(gates * (units * ((inp if i == 0 else units) + units) + 2 * units) for i in range(layers))


def _mlp(inp: int, units: list[int]) -> int:
    sizes = [inp, *units]
    return sum(_linear(i, o) for i, o in zip(sizes, sizes[1:], strict=False))


def network_param_count(net: dict[str, Any], spaces: TaskSpaces) -> int:
    """Parameters of rl-games' actor_critic network ``net`` on ``spaces`` (see :func:`policy_param_count`)."""
    towers = 2 if net.get("separate") else 1
    units = list(net["mlp"]["units"])
    cnn_params, feat = conv_stack(net["cnn"], spaces.obs_shape) if net.get("cnn") else (0, spaces.obs_size)
    out = units[-1] if units else feat
    mlp_in = feat
    rnn_params = 0
    rnn = net.get("rnn")
    if rnn:
        r_units, ln = int(rnn["units"]), 2 * int(rnn["units"]) if rnn.get("layer_norm") else 0
        if rnn.get("before_mlp"):
            rnn_in = feat
            mlp_in = r_units + (feat if rnn.get("concat_output") else 0)
        else:
            rnn_in = out + (feat if rnn.get("concat_input") else 0)
            out = r_units + (feat if rnn.get("concat_output") else 0)
        rnn_params = _rnn(rnn["name"], rnn_in, r_units, int(rnn["layers"])) + ln
    space = net["space"]
    if "continuous" in space:
        n = spaces.actions_num
        fixed = space["continuous"].get("fixed_sigma", True)
        head = _linear(out, n) + (n if fixed else _linear(out, n))
    else:
        head = sum(_linear(out, n) for n in spaces.action_dims)
    value = _linear(out, 1)
    return towers * (cnn_params + rnn_params + _mlp(mlp_in, units)) + value + head


def central_value_param_count(plan: Plan) -> int:
    """Parameters of rl-games' central value network (an MLP on the simulator's ``states``, one value); 0 without."""
    if not plan.task.central_value:
        return 0
    state = task_state_dim(plan.task)
    if state is None:
        return 0  # the simulator has no states: rl-games gets none and builds no central value net
    sizes = [state, *plan.task.mlp_units]
    return sum(i * o + o for i, o in zip(sizes, sizes[1:], strict=False)) + sizes[-1] + 1
