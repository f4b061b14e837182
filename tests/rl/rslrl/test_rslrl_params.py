"""The planner's count of rsl_rl's actor and critic equals the models rsl_rl builds (parameters, normalisers)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from rsl_rl.models import MLPModel, RNNModel
from tensordict import TensorDict

from gmiexp.rl.rslrl.config import runner_config
from gmiexp.rl.rslrl.params import model_sizes

OBS, ACT = 7, 3
GAUSS = {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"}
HETERO = {"class_name": "HeteroscedasticGaussianDistribution", "init_std": 1.0, "std_type": "log"}


def built(model: dict[str, Any], inp: int, out: int) -> tuple[int, int]:
    """(parameters, buffer floats) of the model rsl_rl builds (a long counts as two floats)."""
    kw = copy.deepcopy(model)
    cls = RNNModel if "RNN" in kw.pop("class_name", "MLPModel") else MLPModel
    if kw.get("distribution_cfg"):
        kw["distribution_cfg"]["class_name"] = f"rsl_rl.modules.distribution:{kw['distribution_cfg']['class_name']}"
    obs = TensorDict({"policy": torch.zeros(2, inp)}, batch_size=[2])
    m = cls(obs, {"x": ["policy"]}, "x", out, **kw)
    params = sum(p.numel() for p in m.parameters())
    floats = sum(b.numel() * (2 if b.dtype == torch.long else 1) for b in m.buffers())
    return params, floats


@pytest.mark.parametrize("model", [
    {"class_name": "MLPModel", "distribution_cfg": GAUSS},  # rsl_rl's defaults: (256, 256, 256)
    {"class_name": "MLPModel", "hidden_dims": [64, -1, 32], "obs_normalization": True, "distribution_cfg": GAUSS},
    {"class_name": "MLPModel", "hidden_dims": [32, 32], "distribution_cfg": HETERO},
    {"class_name": "MLPModel", "hidden_dims": [128, 64], "obs_normalization": True},  # a critic
    {"class_name": "RNNModel", "rnn_type": "lstm", "hidden_dims": [32], "distribution_cfg": GAUSS},
    {"class_name": "RNNModel", "rnn_type": "gru", "rnn_hidden_dim": 24, "rnn_num_layers": 2, "hidden_dims": [16]},
])
def test_a_models_count_is_the_model_rsl_rl_builds(model: dict[str, Any]) -> None:
    out = 1 if "distribution_cfg" not in model else ACT
    assert model_sizes(model, OBS, out) == built(model, OBS, out)


def test_the_defaults_a_silent_config_gets_are_rsl_rls() -> None:
    cfg = runner_config({}, "", {})
    assert model_sizes(cfg["actor"], OBS, ACT) == built(cfg["actor"], OBS, ACT)
    assert model_sizes(cfg["critic"], OBS, 1) == built(cfg["critic"], OBS, 1)
