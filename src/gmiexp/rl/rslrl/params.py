"""rsl_rl's actor and critic sizes from a runner config, as its ``MLPModel`` and ``RNNModel`` build them.

Counted, not built, so the planner sizes an rsl_rl run's checkpoints and a population's published states without
torch (``tests/rl/rslrl/test_rslrl_params.py`` holds the count equal to rsl_rl's models). rl-games' count
(:func:`gmiexp.rl.rlgames.params.policy_param_count`) reads a task's network, which an rsl_rl run does not build:
its models are the recipe's, ``hidden_dims`` (256, 256, 256) when the config is silent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gmiexp.envs import task_dims, task_state_dim
from gmiexp.plan import Plan
from gmiexp.rl.rslrl.config import runner_config

#: rsl_rl's ``MLPModel`` and ``RNNModel`` defaults
HIDDEN_DIMS = (256, 256, 256)
RNN_HIDDEN_DIM, RNN_LAYERS = 256, 1
#: an ``EmpiricalNormalization``'s buffers: mean, var and std of the input, and its count
NORMALISER_FLOATS = (3, 2)  # (per input, fixed: a long is two floats)


def mlp(inp: int, hidden: list[int], out: int) -> int:
    """Parameters of rsl_rl's ``MLP``: Linear layers through ``hidden`` (-1: the input's size) to ``out``."""
    sizes = [inp, *(inp if h == -1 else int(h) for h in hidden), out]
    return sum(a * b + b for a, b in zip(sizes, sizes[1:], strict=False))


def rnn(kind: str, inp: int, hidden: int, layers: int) -> int:
    """Parameters of torch's ``LSTM``/``GRU`` (two bias vectors a gate)."""
    gates = 3 if kind.lower() == "gru" else 4
    return sum(gates * (hidden * ((inp if i == 0 else hidden) + hidden) + 2 * hidden) for i in range(layers))


def model_sizes(model: Mapping[str, Any], inp: int, out: int) -> tuple[int, int]:
    """(parameters, normaliser floats) of one rsl_rl model on ``inp`` observations with ``out`` outputs."""
    params, latent = 0, inp
    if "RNN" in str(model.get("class_name", "MLPModel")):
        hidden = int(model.get("rnn_hidden_dim", RNN_HIDDEN_DIM))
        params += rnn(str(model.get("rnn_type", "lstm")), inp, hidden, int(model.get("rnn_num_layers", RNN_LAYERS)))
        latent = hidden
    dist = model.get("distribution_cfg") or None
    heads = out
    if dist is not None:
        if "Heteroscedastic" in str(dist.get("class_name", "")):
            heads = 2 * out  # the MLP outputs mean and std
        else:
            params += out  # a Gaussian's scalar std (or log std) parameter
    params += mlp(latent, list(model.get("hidden_dims", HIDDEN_DIMS)), heads)
    per, fixed = NORMALISER_FLOATS
    return params, (per * inp + fixed if model.get("obs_normalization") else 0)


def rslrl_sizes(plan: Plan) -> tuple[int, int]:
    """(parameters, normaliser floats) of the actor and critic an rsl_rl run's GMIs build.

    An mjlab task's recipe is not read here (it would import mjlab): its actor's sizes, which the task records
    (``task.mlp_units``), stand for both models' unless ``train.file`` or ``train.rslrl`` give them.
    """
    cfg = runner_config({}, plan.train.file, dict(plan.train.rslrl))
    obs, act = task_dims(plan.task)
    critic_obs = (task_state_dim(plan.task) or obs) if plan.task.central_value else obs
    recipe = plan.task.simulator == "mjlab" and not plan.task.vec_env
    sizes = []
    for name, inp, out in (("actor", obs, act), ("critic", critic_obs, 1)):
        model = dict(cfg.get(name) or {})
        if recipe and "hidden_dims" not in model:
            model["hidden_dims"] = list(plan.task.mlp_units)
        sizes.append(model_sizes(model, inp, out))
    return sum(p for p, _ in sizes), sum(b for _, b in sizes)
