"""Weight board (versioned shared-memory weights) and the trainer's advantage estimate, checked by hand."""

from __future__ import annotations

import pickle

import pytest
import torch
from torch import nn

from gmiexp.comm.channels import leftovers
from gmiexp.rl.experience.weights import WeightBoard, state_nbytes
from gmiexp.rl.learner.gae import gae


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


def test_gae_matches_a_hand_computed_rollout() -> None:
    # horizon 3, one env: records 0 and 1 are trained, record 2 bootstraps; done after record 0
    batch = {"values": torch.tensor([1.0, 2.0, 3.0]), "rewards": torch.tensor([1.0, 1.0, 0.0]),
             "dones": torch.tensor([1, 0, 0], dtype=torch.uint8), "obs": torch.zeros(3, 4),
             "actions": torch.zeros(3, dtype=torch.long), "neglogp": torch.zeros(3)}
    g, lam = 0.9, 0.5
    out = gae(batch, 3, 1, g, lam)
    d1 = 1.0 + g * 3.0 - 2.0  # record 1 bootstraps from record 2's value
    d0 = 1.0 - 1.0  # record 0 ends its episode: no bootstrap, no carry
    assert torch.allclose(out["advantages"], torch.tensor([d0, d1]))
    assert torch.allclose(out["returns"], torch.tensor([d0 + 1.0, d1 + 2.0]))
    assert out["obs"].shape == (2, 4)
