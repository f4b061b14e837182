"""What rl-games' PPO step needs to run on the ``lazy`` stand-in device (see :mod:`gmiexp.device`).

Two gaps of the lazy TorchScript backend, measured with torch 2.13:

* No fused Adam kernel: rl-games 1.6.5 builds ``Adam(fused=True)``; the agents rebuild it unfused
  on devices whose type has no fused kernel.
* Python scalars meeting 0-dim tensors. The backend lowers a Python float as a 0-dim float64
  tensor; TorchScript then promotes ``0-dim float32 * 0-dim float64`` to float64, whereas eager
  PyTorch (and the backend's own dtype bookkeeping) keep float32 because a Python scalar is a
  "wrapped number" that never promotes. rl-games' loss (``a_loss + 0.5 * c_loss * critic_coef -
  entropy * entropy_coef``, all 0-dim) and its backward therefore carry float64 values labelled
  float32, and the first op that checks dtypes fails: the backward's ``mm`` ("expected m1 and m2 to
  have the same dtype"), ``clip_grad_norm_`` or Adam's ``exp_avg.lerp_`` ("double != float").
  No float64 tensor of rl-games or gmiexp is involved. Inside rl-games' ``calc_gradients`` the
  agents have ``aten::mul`` run through the backend's eager fallback, which promotes as eager
  does (the backend takes one forced op only). gmiexp's own losses (``rl/learner/losses.py``) avoid the pattern instead.
  The price: inside that scope a ``mul`` mixing a lazy and a host tensor is not caught (every
  other op still is).

And one habit of it: nothing runs until a tensor is read, so the weights and Adam's moments carry every
optimiser step as pending graph until it is cut (:func:`gmiexp.device.step_boundary`). The vec-envs cut it
at each environment step, so a tcg_ex epoch compiled and ran a longer graph for every minibatch, and the
trainer agent of tdg_ex (it steps no environment) one longer with every minibatch of the run. The same
scope cuts it at the end of every gradient step.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from gmiexp.device import step_boundary

#: Device types with a fused Adam kernel in torch 2.x (``torch.optim.adam`` checks the same list).
FUSED_ADAM_DEVICES = ("cpu", "cuda", "mps", "xpu", "hpu")
#: The op of rl-games' loss whose scalar operands the lazy backend promotes wrongly on 0-dim tensors.
SCALAR_OP = "aten::mul"


def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def unfused_adam(model: nn.Module, optimizer: torch.optim.Optimizer, lr: float,
                 weight_decay: float) -> torch.optim.Optimizer:
    """``optimizer`` unfused where ``model``'s device has no fused Adam (lazy), else ``optimizer`` unchanged.

    rl-games 1.6.5 builds Adam with ``fused=True``, which only a few device types implement. The one home of that
    swap for every rl-games agent gmiexp builds (the GMI agent, its central value net, the fed agent).
    """
    if model_device(model).type in FUSED_ADAM_DEVICES:
        return optimizer
    return torch.optim.Adam(model.parameters(), float(lr), eps=1e-08, weight_decay=weight_decay)


@contextmanager
def lazy_scalar_guard(model: nn.Module) -> Iterator[None]:
    """A gradient step on the lazy device: ``mul`` through the eager fallback, the graph cut at its end (else no-op)."""
    if model_device(model).type != "lazy":
        yield
        return
    import torch._lazy.config as lazy_config

    before = lazy_config.get_force_fallback()
    lazy_config.set_force_fallback(SCALAR_OP)
    try:
        yield
    finally:
        lazy_config.set_force_fallback(before)
    step_boundary(next(model.parameters()))  # the next step's graph starts from the weights and moments as data
