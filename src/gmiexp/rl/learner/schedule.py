"""The learning-rate schedule of the experience trainers: rl-games' own schedulers, chosen by ``train.lr_schedule``.

The rule lives in one place (``rl_games.common.schedulers``, as layout tcg_ex applies it); this
module only picks it. ``linear`` counts frames (rows trained by the whole trainer group), because
an asynchronous trainer cannot know its number of updates in advance, while the rows the agents
will send are fixed by the plan. ``adaptive`` is fed the KL averaged over the trainer group
(:class:`~gmiexp.rl.learner.update.Learner` reduces it with the gradients), so every trainer sets
the same rate.
"""

from __future__ import annotations

from rl_games.common import schedulers

from gmiexp.config import TrainConfig
from gmiexp.errors import invalid

SCHEDULES = ("adaptive", "linear", "identity")


def make_schedule(train: TrainConfig, max_frames: int) -> schedulers.RLScheduler:
    """The scheduler of ``train.lr_schedule``; ``max_frames``: rows the trainer group trains in this run."""
    if train.lr_schedule == "adaptive":
        return schedulers.AdaptiveScheduler(float(train.kl_threshold))
    if train.lr_schedule == "linear":
        return schedulers.LinearScheduler(float(train.learning_rate), max_steps=max(1, max_frames), use_epochs=False)
    if train.lr_schedule == "identity":
        return schedulers.IdentityScheduler()
    raise invalid("train.lr_schedule", train.lr_schedule, SCHEDULES)


def needs_kl(train: TrainConfig) -> bool:
    """Whether the schedule reads the KL (only then is it worth the bytes in the reduction)."""
    return train.lr_schedule == "adaptive"
