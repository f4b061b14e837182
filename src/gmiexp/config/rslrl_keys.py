"""The rsl_rl runner-config keys ``train=rslrl`` passes to rsl_rl or reads.

One home for the schema's ``train.rslrl`` check and the runner-config import (:mod:`gmiexp.rl.rslrl.config`):
rsl_rl's OnPolicyRunner config, and mjlab's and Isaac Lab's runner dataclasses as ``params/agent.yaml`` saves
them; ``policy`` and ``empirical_normalization`` are the pre-4.0 format, upgraded on import.
"""

from __future__ import annotations

RUNNER_KEYS: tuple[str, ...] = (
    "class_name", "num_steps_per_env", "max_iterations", "save_interval", "obs_groups", "actor", "critic",
    "algorithm", "seed", "experiment_name", "run_name", "logger", "wandb_project", "wandb_tags",
    "neptune_project", "resume", "load_run", "load_checkpoint", "clip_actions", "upload_model", "check_for_nan",
    "torch_compile_mode", "empirical_normalization", "policy",
)
