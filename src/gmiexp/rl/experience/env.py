"""The simulator of a serving GMI and the tensors it returns (host arrays or device tensors)."""

from __future__ import annotations

from typing import Any

import torch

from gmiexp.envs import make_vec_env
from gmiexp.role import Role


def make_env(role: Role) -> Any:
    plan, gmi = role.plan, role.ctx.gmi
    return make_vec_env(plan.task, gmi.num_envs, seed=gmi.env_seed, sim_threads=gmi.sim_threads,
                        device=str(role.device))


def as_tensor(x: Any) -> torch.Tensor:
    return x if torch.is_tensor(x) else torch.as_tensor(x)


def on_device(x: Any, device: torch.device) -> torch.Tensor:
    """Observations for the model: envpool returns host arrays, torch simulators device tensors."""
    return as_tensor(x).to(device)
