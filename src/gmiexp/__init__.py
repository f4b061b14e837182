"""gmiexp: deep-RL training on GPUs shared by spatial multiplexing (the GMI-DRL paper)."""

__version__ = "0.1.0"
