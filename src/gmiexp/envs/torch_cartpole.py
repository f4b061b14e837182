"""Torch-native vectorised cart-pole: classic dynamics on an N x 4 tensor, same-step auto-reset.

Fast enough that a whole PPO run fits in a test, and the vectorised
simulator of seed 002 (one tensor op per physics step for all envs). Its whole state (the
environments' states, their step counters and its random generator) saves and loads
(:meth:`TorchCartpole.get_state`), so a resumed run steps on as if it had never stopped.
"""

from __future__ import annotations

import math

import torch

GRAVITY, MASSCART, MASSPOLE, HALF_LENGTH, FORCE, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
THETA_LIMIT, X_LIMIT = 12 * 2 * math.pi / 360, 2.4


def physics_step(state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """One Euler step of the classic cart-pole equations (Barto et al. 1983) for all envs."""
    # indexing, not unbind: multi-output views break on the lazy stand-in device
    x, x_dot, theta, theta_dot = (state[..., i] for i in range(4))
    force = (action.to(state.dtype) * 2 - 1) * FORCE
    cos, sin = torch.cos(theta), torch.sin(theta)
    total_mass = MASSCART + MASSPOLE
    pml = MASSPOLE * HALF_LENGTH
    temp = (force + pml * theta_dot**2 * sin) / total_mass
    theta_acc = (GRAVITY * sin - cos * temp) / (HALF_LENGTH * (4.0 / 3.0 - MASSPOLE * cos**2 / total_mass))
    x_acc = temp - pml * theta_acc * cos / total_mass
    return torch.stack(
        (x + TAU * x_dot, x_dot + TAU * x_acc, theta + TAU * theta_dot, theta_dot + TAU * theta_acc), dim=-1
    )


def failed(state: torch.Tensor) -> torch.Tensor:
    return (state[:, 0].abs() > X_LIMIT) | (state[:, 2].abs() > THETA_LIMIT)


class TorchCartpole:
    """Batched cart-pole. ``step`` returns (obs, reward, terminated, truncated)."""

    #: :meth:`get_state`'s keys that hold one row per environment (its generator is the simulator's own)
    ENV_ROWS = ("state", "steps")

    def __init__(self, num_envs: int, seed: int = 0, max_episode_length: int = 200,
                 device: str | torch.device = "cpu") -> None:
        self.num_envs = num_envs
        self.max_episode_length = max_episode_length
        self.device = torch.device(device)
        # devices without a random generator of their own (the lazy stand-in) draw on the host
        self._gen_device = self.device if self.device.type in ("cpu", "cuda") else torch.device("cpu")
        self.gen = torch.Generator(device=self._gen_device).manual_seed(seed)
        self.state = torch.zeros(num_envs, 4, device=self.device)
        self.steps = torch.zeros(num_envs, dtype=torch.long, device=self.device)

    def get_state(self) -> dict[str, torch.Tensor]:
        """Everything the next steps depend on, on the host: state, step counters, the generator's state."""
        return {"state": self.state.detach().cpu().clone(), "steps": self.steps.detach().cpu().clone(),
                "generator": self.gen.get_state()}

    def set_state(self, saved: dict[str, torch.Tensor]) -> None:
        """Go on from :meth:`get_state`'s ``saved`` (of as many environments)."""
        if tuple(saved["state"].shape) != tuple(self.state.shape):
            raise ValueError(f"a saved cart-pole of {saved['state'].shape[0]} environments cannot be loaded into "
                             f"one of {self.num_envs}")
        self.state = saved["state"].to(self.device, self.state.dtype)
        self.steps = saved["steps"].to(self.device, self.steps.dtype)
        self.gen.set_state(saved["generator"])

    def _sample(self, n: int) -> torch.Tensor:
        draw = torch.rand(n, 4, generator=self.gen, device=self._gen_device)
        return ((draw - 0.5) * 0.1).to(self.device)

    def reset(self) -> torch.Tensor:
        self.state = self._sample(self.num_envs)
        self.steps.zero_()
        return self.state.clone()

    def step(self, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        self.state = physics_step(self.state, action.reshape(-1))
        self.steps += 1
        terminated = failed(self.state)
        truncated = (self.steps >= self.max_episode_length) & ~terminated
        reward = torch.ones(self.num_envs, device=self.device)
        done = terminated | truncated
        if bool(done.any()):
            idx = done.nonzero(as_tuple=True)[0]
            self.state[idx] = self._sample(len(idx))
            self.steps[idx] = 0
        return self.state.clone(), reward, terminated, truncated
