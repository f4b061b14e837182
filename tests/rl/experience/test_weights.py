"""Weight board (versioned shared-memory weights), checked by hand."""

from __future__ import annotations

import pickle

import pytest
import torch
from torch import nn

from gmiexp.rl.experience.weights import WeightBoard, state_nbytes
from gmiexp.shm.cleanup import leftovers


def test_weight_board_publishes_newest_version_and_leaves_nothing() -> None:
    src, dst = nn.Linear(3, 2), nn.Linear(3, 2)
    src.register_buffer("count", torch.tensor(7.0, dtype=torch.float64))
    dst.register_buffer("count", torch.tensor(0.0, dtype=torch.float64))
    board = WeightBoard.create("wtest", state_nbytes(src), tag="pytestwb")
    reader = pickle.loads(pickle.dumps(board))  # what an agent GMI gets through the rendezvous
    scratch = torch.empty(board.nbytes, dtype=torch.uint8)
    assert reader.read(dst, scratch) == 0  # nothing published yet
    assert board.publish(src) == 1
    with torch.no_grad():
        src.weight.add_(1.0)
    assert board.publish(src) == 2
    assert reader.read(dst, scratch) == 2
    assert torch.equal(dst.weight, src.weight) and dst.count.item() == 7.0
    board.seal()
    assert leftovers("pytestwb") == []
    with pytest.raises(TimeoutError):
        reader.wait(3, timeout_s=0.05)
    board.close()



def test_weight_board_carries_cnn_and_recurrent_separate_models(tmp_path, tag) -> None:
    """Conv, LSTM (separate actor and critic) and normaliser tensors of rl-games' model, bit for bit."""
    from gmitest import compose_config

    from gmiexp.planner.build import build_plan
    from gmiexp.rl.rlgames.policy import Spaces, build_model

    plan, _ = build_plan(compose_config("layout=tdg_ex", "task=Cartpole", "gmis_per_gpu=1", "num_envs=4"), tmp_path)
    plan.task.cnn = {"type": "conv2d", "activation": "relu", "initializer": {"name": "default"},
                     "regularizer": {"name": "None"}, "permute_input": False,
                     "convs": [{"filters": 4, "kernel_size": 3, "strides": 2, "padding": 0}]}
    plan.task.rnn, plan.task.separate = {"name": "lstm", "units": 8, "layers": 1}, True
    spaces = Spaces((4, 12, 12), False, 3, obs_dtype=torch.uint8)
    src = build_model(plan, plan.gmis[0], spaces, torch.device("cpu"))
    plan.seed += 1
    dst = build_model(plan, plan.gmis[0], spaces, torch.device("cpu"))
    names = list(src.state_dict())
    assert any("cnn" in k for k in names) and any("rnn" in k for k in names) and any("c_rnn" in k for k in names)
    board = WeightBoard.create("wkinds", state_nbytes(src), tag=tag)
    try:
        board.publish(src)
        board.read(dst, torch.empty(board.nbytes, dtype=torch.uint8))
        for k, v in src.state_dict().items():
            assert torch.equal(dst.state_dict()[k], v), k
    finally:
        board.close()
