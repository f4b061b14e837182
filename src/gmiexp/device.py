"""The torch device every role of a GMI uses: one setting (``train.device``), resolved here only.

``auto`` is the GMI's GPU on a GPU host (the backend leaves each GMI one visible device, so it is
``cuda:0`` inside the GMI) and the CPU otherwise. ``lazy`` is PyTorch's lazy TorchScript backend,
a second real device in a CPU-only build: tensors on it hold real values, autograd and
``torch.optim`` work, and any op mixing a ``lazy`` tensor with a host tensor raises, as CUDA does.
It is the CPU stand-in accelerator that lets the default test suite check every role's device
handling (a forgotten ``.to(device)`` fails there as it would on a GPU).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gmiexp.errors import invalid

if TYPE_CHECKING:
    import torch

    from gmiexp.hardware import Hardware

#: Valid values of ``train.device``.
DEVICES = ("auto", "cpu", "cuda", "lazy")
#: ``train.device`` values that use no GPU (the ``lazy`` stand-in runs on the host's cores).
HOST_DEVICES = ("cpu", "lazy")


def check_device(name: str, hardware: Hardware) -> None:
    """Exit 2 (ConfigError) on an unknown device, or ``cuda`` on a host (or preset) without a GPU."""
    if name not in DEVICES:
        raise invalid("train.device", name, DEVICES)
    if name == "cuda" and not hardware.has_gpu:
        raise invalid("train.device", name, ("auto", *HOST_DEVICES), hint=f"no GPU on {hardware.describe()}")


def host_staging(device: torch.device) -> bool:
    """True when collectives over the gloo process group must copy ``device`` tensors through the host.

    gloo reduces CPU and CUDA tensors itself; tensors of any other device (the ``lazy`` stand-in)
    reach it as unrealised graphs, and gloo then returns them unreduced without an error.
    """
    return device.type not in ("cpu", "cuda")


def resolve_device(name: str) -> torch.device:
    """The torch device of this GMI for ``train.device=name`` (call inside the GMI's process)."""
    import torch

    if name == "cpu":
        return torch.device("cpu")
    if name == "lazy":
        init_lazy()
        return torch.device("lazy")
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "") != "" and torch.cuda.is_available()
    if name == "cuda":
        if not torch.cuda.is_available():
            raise invalid("train.device", name, ("auto", *HOST_DEVICES), hint="torch sees no CUDA device here")
        return torch.device("cuda:0")
    if name == "auto":
        return torch.device("cuda:0") if gpu else torch.device("cpu")
    raise invalid("train.device", name, DEVICES)


def init_lazy() -> None:
    """Start the lazy TorchScript backend (idempotent)."""
    import torch._lazy.ts_backend

    global _lazy_ready
    if not _lazy_ready:
        torch._lazy.ts_backend.init()
        _lazy_ready = True


_lazy_ready = False


def step_boundary(t: torch.Tensor) -> None:
    """Cut the lazy device's pending graph at a step boundary (as XLA's ``mark_step``); no-op elsewhere.

    Without it a rollout's graph grows with every step (each write into the experience buffer
    extends it), and a trainer's with every optimiser step (the weights and Adam's moments keep
    their history), so every step compiles a new, longer graph. The vec-envs cut at each
    environment step; a trainer that steps no environment cuts after each optimiser step.
    """
    if t.device.type == "lazy":
        import torch._lazy

        torch._lazy.mark_step()


def check_device_task(name: str, recurrent: bool) -> None:
    """Exit 2 where the stand-in cannot run the policy: PyTorch's lazy backend has no LSTM/GRU kernel.

    ``torch.nn.LSTM``/``GRU`` on ``lazy`` fail inside ``_VF.lstm`` ("Input tensor is not a lazy tensor")
    whatever the inputs' device (measured with torch 2.13), so a recurrent policy (``task.rnn``) runs on
    cpu or cuda only.
    """
    if name == "lazy" and recurrent:
        raise invalid("train.device", name, ("auto", "cpu", "cuda"),
                      hint="a recurrent policy (task.rnn) cannot run on the lazy stand-in: PyTorch's lazy backend "
                      "has no LSTM/GRU kernel")
