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

