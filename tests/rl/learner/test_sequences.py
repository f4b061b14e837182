"""Chunk-start states spread over a chunk's rows (what the channels carry) and read back per sequence."""

from __future__ import annotations

import torch

from gmiexp.rl.learner.sequences import as_sequences, env_major, sequence_rows
from gmiexp.rl.rlgames.states import StateLayout


def test_agent_pieces_give_back_every_chunk_start_over_overlapping_rollouts() -> None:
    """The agent's loop: record 0 of a rollout is the previous one's last record; pieces run on across rollouts."""
    layout = StateLayout(count=2, layers=2, units=3, seq_length=4)  # 12 floats over 4 rows: width 3
    assert (layout.size, layout.width) == (12, 3)
    horizon, n = 9, 2
    g = torch.Generator().manual_seed(0)
    buf = torch.zeros(horizon, n, layout.width)
    chunk = None
    want: list[torch.Tensor] = []
    start, prev_last = 0, None
    for _ in range(2):
        starts = {}
        for t in range(start, horizon):
            states = tuple(torch.randn(2, n, 3, generator=g) for _ in range(2))  # the policy's states before step t
            if t % layout.seq_length == 0:
                chunk = layout.flatten(states)
                starts[t] = states
            buf[t] = layout.piece(chunk, t)
        if start == 1:  # the first chunk of this rollout began at the previous rollout's last record
            starts[0] = prev_last
        got = layout.chunk_starts(buf.reshape(horizon * n, -1), horizon, n)
        # sequences are environment-major: environment e, chunk c is e * chunks + c
        for e in range(n):
            for c in range(2):
                s = starts[c * 4]
                assert torch.equal(got[e * 2 + c], torch.stack([x[:, e] for x in s]))
        prev_last = starts[horizon - 1]
        want.append(got)
        buf[0] = buf[horizon - 1]
        start = 1
    assert not torch.equal(want[0], want[1])


def test_rollout_rows_become_sequences_with_episode_start_flags() -> None:
    horizon, n, layout = 5, 2, StateLayout(1, 1, 2, seq_length=2)
    dones = torch.tensor([[0, 1], [1, 0], [0, 0], [0, 1], [1, 1]], dtype=torch.uint8)
    part = {"obs": torch.arange((horizon - 1) * n).float()}  # step-major rows t * n + e
    batch = {"dones": dones.reshape(-1), "rnn_states": torch.zeros(horizon * n, 1)}
    out = as_sequences(part, batch, horizon, n, layout)
    assert out["obs"].tolist() == [0, 2, 4, 6, 1, 3, 5, 7]  # env 0's steps, then env 1's
    # episode start before step t = done of step t - 1 (record 0: its states arrive already reset)
    assert out["firsts"].tolist() == [0, 0, 1, 0, 0, 1, 0, 0]
    assert out["rnn_states"].shape == (4, 1, 1, 2)
    assert env_major(horizon, n).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    assert sequence_rows(torch.tensor([3, 1]), 2).tolist() == [6, 7, 2, 3]
