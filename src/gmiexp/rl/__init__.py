"""Reinforcement learning by role family: ``rlgames``, ``experience`` (serving and experience roles), ``learner``."""
