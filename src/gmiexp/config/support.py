"""Which ``train.*`` settings gmiexp's learner refuses (exit 2 at plan time).

A fact about the config (which fields only rl-games' own agent applies), so it lives beside the
schema: the planner reads it without importing the learner (``plan/`` stays below what runs).

The learner applies the PPO/A2C hyper-parameters, the normalisers and ``lr_schedule`` with
``kl_threshold`` (:mod:`gmiexp.rl.learner.schedule`). The settings below belong to rl-games' own
agent and runner (layout tcg_ex); with an experience layout any value but the default is refused
rather than silently ignored.
"""

from __future__ import annotations

from gmiexp.config import TrainConfig

#: Fields only rl-games' own agent applies: its bounds-loss variant, smooth clamp, early stop, mixed
#: precision, torch.compile, periodic checkpoints (the experience trainer saves one at the end) and its
#: per-epoch digest check (the experience trainers report their digests in result.json instead).
RLGAMES_ONLY = ("bound_loss_type", "use_smooth_clamp", "score_to_win", "mixed_precision", "torch_compile",
                "save_frequency", "check_sync")


def refused(train: TrainConfig) -> list[str]:
    """The ``train.<field>`` keys set away from their default that the learner would not apply."""
    default = TrainConfig()
    return [f"train.{k}" for k in RLGAMES_ONLY if getattr(train, k) != getattr(default, k)]
