"""Checkpoints of every training layout in rl-games' format, so any of them resumes any other.

rl-games' PPO (TCG_EX) saves ``{"model", "optimizer", "epoch", "frame", ...}`` and resumes through
``Runner.run(checkpoint=...)``. The experience layouts (TDG_EX, decoupled async) train the same
rl-games model with gmiexp's own trainer: their first trainer writes the same keys at the end of a
run, and every trainer loads them at the start (weights with the normalisers inside, the Adam
state, the epoch and frame counters). Serving layouts (TCG, TDG) load the weights and serve that
policy. Tensors are saved on the host, so a checkpoint loads on any device.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from rl_games.algos_torch import torch_ext
from torch import nn

from gmiexp.rl.state import learning_only, to_host


def load(path: str) -> dict[str, Any]:
    """rl-games' own loader (it also strips ``torch.compile``'s ``_orig_mod.`` prefixes)."""
    return torch_ext.load_checkpoint(path)


def restore(model: nn.Module, state: dict[str, Any], optimizer: torch.optim.Optimizer | None = None) -> None:
    """Weights and normalisers into ``model``; the Adam state into ``optimizer``.

    The learning rate to go on with is the trainer's (its ``restore_schedule`` reads :data:`SCHEDULE_KEY`).
    """
    model.load_state_dict(state["model"])
    if optimizer is not None and "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])


def save(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int, frame: int,
         schedule: dict[str, float] | None = None) -> Path:
    """Write an rl-games-format checkpoint (``path`` without ``.pth``, as rl-games names them) and its checksum.

    ``schedule``: the learning rate and entropy coefficient to go on with (:data:`SCHEDULE_KEY`).
    """
    os.makedirs(path.parent, exist_ok=True)
    state = {"model": to_host(model.state_dict()), "optimizer": to_host(optimizer.state_dict()),
             "epoch": epoch, "frame": frame, "last_mean_rewards": -1e9}
    if schedule is not None:
        state[SCHEDULE_KEY] = dict(schedule)
    pth = path.with_name(path.name + ".pth")
    with checksummed(pth):
        torch_ext.save_checkpoint(str(path), state)
    return pth


#: rl-games' running means over its last ``games_to_track`` episodes (an agent's ``torch_ext.AverageMeter``s)
EPISODE_METERS = ("game_rewards", "game_shaped_rewards", "game_lengths")
EPISODES_KEY = "gmiexp_episodes"  # beside rl-games' own keys; rl-games' loader ignores it


def episode_meters(agent: Any) -> dict[str, dict[str, Any]]:
    """The agent's episode means and counts, for its checkpoint.

    rl-games does not save them, so after every restart (a resume, a requeue, a re-shape) the reported return
    was empty until an episode ended, then the mean of the episodes since the restart only.
    """
    return {name: {"mean": getattr(agent, name).mean.detach().cpu().clone(),
                   "size": int(getattr(agent, name).current_size)} for name in EPISODE_METERS}


#: the learning-rate schedule's state beside rl-games' own keys: rl-games restores the optimiser but not its
#: ``last_lr``, so the adaptive schedule began again from ``learning_rate`` after every restart
SCHEDULE_KEY = "gmiexp_schedule"


def schedule_state(agent: Any) -> dict[str, float]:
    """The agent's learning rate and entropy coefficient as its scheduler left them, for its checkpoint."""
    return {"last_lr": float(agent.last_lr), "entropy_coef": float(agent.entropy_coef)}


def restore_schedule(agent: Any, state: dict[str, Any]) -> None:
    """Go on with a checkpoint's learning rate (a resume, a requeue, a re-shape), as one uninterrupted run would."""
    saved = state.get(SCHEDULE_KEY) or {}
    if "entropy_coef" in saved:
        agent.entropy_coef = float(saved["entropy_coef"])
    if "last_lr" in saved:
        agent.last_lr = float(saved["last_lr"])
        for group in agent.optimizer.param_groups:
            group["lr"] = agent.last_lr


def restore_episode_meters(agent: Any, state: dict[str, Any]) -> None:
    """Put a checkpoint's episode means back, so the return the run reports goes on where it was."""
    for name, saved in (state.get(EPISODES_KEY) or {}).items():
        restore_meter(getattr(agent, name, None), saved)


def restore_meter(meter: Any, saved: dict[str, Any]) -> None:
    """One meter's saved mean and count, in the saved shape.

    rl-games' meter changes its mean's shape at its first update (a return window's ``(1,)`` becomes ``(1, 1)``, as
    the agent indexes its running sums), so a fresh meter's shape is not a saved one's: before, a restart
    compared the shapes and left every return window empty (only the lengths' came back).
    """
    if meter is None or saved["mean"].numel() != meter.mean.numel():
        return  # another task's checkpoint: its returns say nothing about this one
    meter.mean = saved["mean"].to(meter.mean.device, meter.mean.dtype).clone()
    meter.current_size = min(int(saved["size"]), int(meter.max_size))


#: the run beside the model (:mod:`gmiexp.rl.rlgames.runstate`): the segment that wrote the checkpoint, and every
#: GMI's generators, simulator and running episodes; rl-games' loader ignores it
RUN_KEY = "gmiexp_run"


def run_segment(state: dict[str, Any] | None) -> int:
    """The segment a start from checkpoint ``state`` is (:mod:`gmiexp.planner.seeds`): 0 without a checkpoint.

    The segment that wrote it plus one; a checkpoint that does not say (an older gmiexp's, rl-games' own, an
    experience trainer's) counts as segment 0's.
    """
    if state is None:
        return 0
    return int((state.get(RUN_KEY) or {}).get("segment", 0)) + 1


#: the schedule's entries (:func:`schedule_state`) by the ``train.*`` key that sets them
SCHEDULED = {"learning_rate": "last_lr", "entropy_coef": "entropy_coef"}


def for_another_run(state: dict[str, Any], changed: Collection[str] = ()) -> dict[str, Any]:
    """Checkpoint ``state`` as another run starts from it (a PBT member copying its leader): the learning only.

    The model, normalisers, optimiser and counters stay; the writer's own part of the run (its GMIs' generators,
    simulator and running episodes) goes, so the new start draws its own streams (its seed's, in the next segment)
    instead of replaying the source's: before, a member that copied a leader on the same partition went on with
    the leader's generators and environments and repeated its returns exactly. The schedule stays but for what
    the new run sets otherwise (``changed``: ``train`` keys such as ``learning_rate``): a mutated learning rate
    starts from its new value, as the anchors' restart does, where the saved schedule used to override it.
    """
    out = dict(state)
    if RUN_KEY in state:
        out[RUN_KEY] = learning_only(state[RUN_KEY])
    drop = {SCHEDULED[k] for k in changed if k in SCHEDULED}
    if isinstance(state.get(SCHEDULE_KEY), dict) and drop:
        out[SCHEDULE_KEY] = {k: v for k, v in state[SCHEDULE_KEY].items() if k not in drop}
    return out


#: a checkpoint's checksum sits beside it, in ``sha256sum``'s format (``sha256sum -c`` checks it)
CHECKSUM_SUFFIX = ".sha256"


def checksum_path(pth: Path) -> Path:
    return pth.with_name(pth.name + CHECKSUM_SUFFIX)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextmanager
def checksummed(pth: Path) -> Iterator[None]:
    """Around a write of ``pth``: drop its old checksum first, write the new one once the file is whole.

    A write cut short (killed, disk full) leaves a file without a checksum or with none of its own, never a
    damaged file under a matching one; :func:`verify` tells which.
    """
    side = checksum_path(Path(pth))
    side.unlink(missing_ok=True)
    yield
    tmp = side.with_name(side.name + ".tmp")
    tmp.write_text(f"{file_sha256(Path(pth))}  {Path(pth).name}\n")
    tmp.replace(side)


def verify(pth: Path) -> bool | None:
    """True: the file matches its checksum; False: it does not (damaged); None: it has none (older gmiexp)."""
    side = checksum_path(Path(pth))
    try:
        want = side.read_text().split()[0]
    except (OSError, IndexError):
        return None
    return file_sha256(Path(pth)) == want

