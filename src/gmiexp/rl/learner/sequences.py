"""Recurrent policies in the experience layouts: how states travel and how rows become ``seq_length`` sequences.

rl-games' convention (``a2c_common.play_steps_rnn`` and ``datasets.PPODataset``): the agent keeps
the states at the start of every ``seq_length`` chunk of its rollout; the learner cuts the rollout
into sequences of ``seq_length`` steps of one environment (environment-major), runs the recurrent
model over each sequence from its chunk-start states, with the episode-start flags (``dones`` as
rl-games stores them: the episode ended before this step) resetting states inside a sequence.

The channels are row-aligned (one row = one environment at one step), so the chunk-start states of
an environment (``size`` floats) are spread over the ``seq_length`` rows of its chunk: row ``j`` of
the chunk carries floats ``j * width .. (j + 1) * width`` (``width = ceil(size / seq_length)``). The
channels move the states once per sequence, as rl-games keeps them, not once per step.

Rollouts overlap by one record (the bootstrap record is sent again as the next rollout's first), so
the trained records of a rollout are ``0 .. horizon - 2`` and ``horizon - 1`` must be a multiple of
``seq_length`` (checked at plan time, :mod:`gmiexp.rl.learner.support`): the bootstrap record then
opens the next rollout's first chunk, and the agent's chunk counter runs on unchanged across rollouts.
"""

from __future__ import annotations

import torch

from gmiexp.rl.rlgames.policy import preproc_obs
from gmiexp.rl.rlgames.states import FIELD, StateLayout


def env_major(horizon: int, n: int) -> torch.Tensor:
    """Row order of a rollout's trained records as sequences: environment-major, then step."""
    return torch.arange((horizon - 1) * n).reshape(horizon - 1, n).T.reshape(-1)


def as_sequences(part: dict[str, torch.Tensor], batch: dict[str, torch.Tensor], horizon: int, n: int,
                 layout: StateLayout) -> dict[str, torch.Tensor]:
    """A rollout's trained rows (``part``, step-major as GAE returns them) in sequences, with states and flags.

    Adds ``rnn_states`` (one per sequence) and ``firsts`` (the episode ended before this step:
    rl-games' stored ``dones``, which reset the states inside a sequence).
    """
    order = env_major(horizon, n)
    out = {k: v[order] for k, v in part.items()}
    dones = batch["dones"].reshape(horizon, n).float()
    firsts = torch.cat([torch.zeros(1, n), dones[:horizon - 2]])  # record 0's predecessor: states already reset
    out["firsts"] = firsts.reshape(-1)[order]
    out[FIELD] = layout.chunk_starts(batch[FIELD], horizon, n)
    return out


def sequence_rows(seqs: torch.Tensor, seq_length: int) -> torch.Tensor:
    """Row indices of whole sequences, in order."""
    return (seqs.reshape(-1, 1) * seq_length + torch.arange(seq_length)).reshape(-1)


def model_input(d: dict[str, torch.Tensor], idx: torch.Tensor, seq_length: int) -> dict[str, object]:
    """rl-games' training input for the rows ``idx`` (whole sequences of a recurrent policy)."""
    x: dict[str, object] = {"is_train": True, "prev_actions": d["actions"][idx], "obs": preproc_obs(d["obs"][idx])}
    if FIELD in d:
        seqs = idx[::seq_length] // seq_length
        s = d[FIELD][seqs]  # (sequences, count, layers, units)
        x["rnn_states"] = tuple(s[:, i].permute(1, 0, 2).contiguous() for i in range(s.shape[1]))
        x["seq_length"] = seq_length
        x["dones"] = d["firsts"][idx]
    return x


__all__ = ["as_sequences", "env_major", "model_input", "sequence_rows"]
