"""What both trainers do with a model's and a run's state: host copies, digests, generators, a GMI's record.

One home for rl-games' and rsl_rl's GMIs (checkpoints, run state, the ``sync/digest`` of history rows, the
experience trainers' weight checks). A checkpoint that holds the run keeps one record per GMI of the partition that
wrote it (``gmiexp.rl.rlgames.runstate``, ``gmiexp.rl.rslrl.runstate``): each GMI's random streams
(:func:`generator_states`), its simulator and its running episodes; a start on the same partition gives every GMI
its own back (:func:`own_record`, :func:`onto`).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn


def to_host(obj: Any) -> Any:
    """``obj`` with every tensor inside (dicts, lists, tuples) detached and copied to the host.

    A stand-in device's storage (``lazy``) cannot be pickled, and a checkpoint must load on any device.
    """
    if torch.is_tensor(obj):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: to_host(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(to_host(v) for v in obj)
    return obj


def state_digest(*states: Mapping[str, Any]) -> str:
    """A hash of the exact bytes of every tensor of the ``state_dict`` s, names and order included."""
    h = hashlib.sha1()
    for state in states:
        for name, t in state.items():
            if torch.is_tensor(t):
                h.update(name.encode())
                h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def model_digest(*models: nn.Module) -> str:
    """:func:`state_digest` of ``models``' parameters and buffers (normalisers included): equal on GMIs in sync."""
    return state_digest(*(m.state_dict() for m in models))


def generator_states(device: torch.device | str) -> dict[str, Any]:
    """The process's random streams: torch's CPU generator, numpy's, random's, and ``device``'s own (CUDA).

    numpy's state is kept as a tensor and plain numbers, so a ``weights_only`` loader reads the checkpoint too.
    """
    name, keys, pos, has_gauss, cached = np.random.get_state()
    out: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {"name": str(name), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "random": random.getstate(),
    }
    device = torch.device(device)
    if device.type == "cuda":
        out["cuda"] = torch.cuda.get_rng_state(device)
    return out


def set_generator_states(saved: dict[str, Any], device: torch.device | str) -> None:
    """Go on with the streams :func:`generator_states` recorded (a device generator only on that kind of device)."""
    torch.set_rng_state(saved["torch"])
    n = saved["numpy"]
    np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    random.setstate(_tuples(saved["random"]))
    device = torch.device(device)
    if "cuda" in saved and device.type == "cuda":
        torch.cuda.set_rng_state(saved["cuda"], device)


def _tuples(obj: Any) -> Any:
    """``random.getstate()``'s nested tuples, as they were (a loader may hand lists back)."""
    return tuple(_tuples(x) for x in obj) if isinstance(obj, (list, tuple)) else obj


class Mismatch(ValueError):
    """A record that does not fit this GMI (other shapes, other keys): it is not restored."""


def onto(saved: Any, like: Any) -> Any:
    """``saved`` moved onto the devices of ``like`` (same structure and shapes; the saved dtypes kept)."""
    if torch.is_tensor(like):
        if not torch.is_tensor(saved) or tuple(saved.shape) != tuple(like.shape):
            raise Mismatch(f"saved {getattr(saved, 'shape', type(saved).__name__)}, here {tuple(like.shape)}")
        return saved.to(like.device)
    if isinstance(like, dict):
        if not isinstance(saved, dict) or saved.keys() != like.keys():
            raise Mismatch("other keys")
        return {k: onto(saved[k], like[k]) for k in like}
    if isinstance(like, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(like):
            raise Mismatch("other lengths")
        return type(like)(onto(s, v) for s, v in zip(saved, like, strict=True))
    return saved


def own_record(run: dict[str, Any] | None, rank: int, world_size: int) -> dict[str, Any] | None:
    """GMI ``rank``'s record in a checkpoint's run, when the run had this partition's GMIs (else None: a re-shape)."""
    gmis = (run or {}).get("gmis") or []
    if int((run or {}).get("world_size", -1)) != world_size or len(gmis) != world_size:
        return None
    return gmis[rank]


__all__ = ["Mismatch", "generator_states", "model_digest", "onto", "own_record", "set_generator_states", "state_digest",
           "to_host"]


def learning_only(run: Any) -> Any:
    """A checkpoint's run (``gmiexp_run``) as another run starts from it: the segment, not the writer's own part.

    The writer's GMIs' generators, simulator and running episodes go, so a population member that copies a leader
    draws its own streams (its seed's, in the next segment) instead of replaying the leader's (both trainers'
    ``for_another_run``).
    """
    return {"segment": int(run.get("segment", 0))} if isinstance(run, dict) else run
