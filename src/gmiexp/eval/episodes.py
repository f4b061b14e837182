"""Play N episodes side by side: one environment each, every environment's first episode counted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch


class Steps(Protocol):
    """What :func:`play` steps: gmiexp's ``GMIVecEnv``, or an rsl_rl VecEnv through ``gmiexp.eval.rslrl.Stepper``."""

    num_envs: int

    def reset(self) -> Any: ...

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, Any]: ...


@dataclass(frozen=True)
class Episodes:
    returns: list[float]  # undiscounted, unshaped (the simulator's own reward)
    lengths: list[int]

    def metrics(self) -> dict[str, float]:
        r = np.asarray(self.returns, dtype=np.float64)
        return {"eval/return_mean": float(r.mean()), "eval/return_std": float(r.std()),
                "eval/length_mean": float(np.mean(self.lengths))}


def play(env: Steps, act: Callable[[Any], torch.Tensor], max_steps: int) -> Episodes:
    """Step every environment until its first episode ends (at most ``max_steps`` steps)."""
    n = env.num_envs
    returns = torch.zeros(n, dtype=torch.float64)
    lengths = torch.zeros(n, dtype=torch.int64)
    running = torch.ones(n, dtype=torch.bool)
    obs = env.reset()
    for _ in range(max_steps):
        obs, reward, done, _info = env.step(act(obs))
        returns += torch.where(running, reward.double().cpu(), 0.0)
        lengths += running.long()
        running &= ~done.bool().cpu().reshape(n)
        if not running.any():
            break
    return Episodes(returns.tolist(), lengths.tolist())
