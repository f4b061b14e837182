"""Fake Isaac Gym: enforces the real package's import-order rule (isaacgym/gymdeps.py) and nothing else."""

import sys

if "torch" in sys.modules:
    raise ImportError("PyTorch was imported before isaacgym modules.  Please import torch after isaacgym modules.")
