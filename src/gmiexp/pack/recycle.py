"""Recycling freed slots: which running member takes a freed slot's units, which units, with how many GMIs.

A unit is what a slot holds (:attr:`gmiexp.pack.slots.Slot.units`): a core on a CPU host, one slot's MPS share of
the SMs on a GPU. Below, "cores" says units; on a GPU no two members share a unit, so a member only grows (a larger
MPS share, or more GMIs on it, by a restart) and never moves.

A member's share of its GPU's cores is what it gets of each core it runs on (1/k of a core k members share). When a
slot frees and its cores fall idle, the member with the smallest share takes them: it keeps the cores only it uses,
adds the idle ones, and gives up the cores it shares (a *move*: when the two short members sharing one core end, one
of the two long members sharing the other core moves there, rather than both spreading over both cores). It takes as
many GMIs as its global batch allows, up to one per core, never fewer than it has. A choice that would not enlarge the
member's share is not made, nor a restart that would not pay (a move keeps the GMIs and the core count, so the member
re-pins its threads where it runs, :mod:`gmiexp.launch.affinity`, and costs nothing): the time saved (each member's
training left at its current epoch time, less the same at its larger share; the members left alone on the cores it
leaves gain too) must exceed :data:`PAYBACK` times its restart (its start-up's work, spawn to first epoch times its
share then, at the new share). A member near its end keeps its cores.

Pure: :meth:`gmiexp.pack.launch.PackedSweep.recycle` reads the members' state and sends the request.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gmiexp.pack.slots import Unit

PAYBACK = 2.0  # a re-shape must save this many times its cost: more GMIs scale less than the cores (1.2-1.5x for 2
# GMIs on 2 cores here) and the stop adds to the start-up


@dataclass(frozen=True)
class Grower:
    """A running member that may take a freed slot: its cores now (or as last asked) and its partitions."""

    num: int
    cores: frozenset[Unit]
    gmis_per_gpu: int
    reachable: tuple[int, ...]  # GMIs per GPU that can share its global batch
    grown: int = 0  # slots it already took (fewest first on a tie)
    free: bool = True  # False: it cannot take a request now (one pending, or it refused the last); its cores count
    left_s: float | None = None  # its training left at its current epoch time; None: not measured yet (not taken)
    startup_core_s: float = 0.0  # its start-up (spawn to first epoch) times its share then: a restart's work


@dataclass(frozen=True)
class Growth:
    num: int
    cores: tuple[Unit, ...]
    gmis_per_gpu: int
    left: tuple[Unit, ...]  # shared cores it gives up


def shares(cores: dict[int, frozenset[Unit]]) -> dict[int, float]:
    """Each holder's share of the cores, in cores: a core held by k holders counts 1/k for each."""
    use = Counter(c for held in cores.values() for c in held)
    return {k: sum(1 / use[c] for c in held) for k, held in cores.items()}


def choose(freed: tuple[Unit, ...], members: list[Grower], payback: float = PAYBACK) -> Growth | None:
    """Who takes the freed slot's cores ``freed`` (those idle now), or None when no member's share would grow.

    ``members``: the running members on the slot's GPU. ``payback``: how many times the restart a re-shape must
    save (``hydra.launcher.recycle_payback``). The saving counts every member whose share grows: the one that
    re-shapes, and those left alone on the cores it leaves (they go faster without a restart). The restart is the
    member's start-up work at its new share.
    """
    use = Counter(c for m in members for c in m.cores)
    idle = sorted(c for c in freed if use[c] == 0)
    if not idle:
        return None
    have = shares({m.num: m.cores for m in members})
    for m in sorted((m for m in members if m.free), key=lambda m: (have[m.num], m.grown, m.num)):
        own = {c for c in m.cores if use[c] == 1}
        cores = tuple(sorted(own | set(idle)))
        if len(cores) <= have[m.num] + 1e-9:
            continue  # leaving its shared cores for these would not give it more
        if m.left_s is None:
            continue  # no epoch measured since its last start: not yet
        after = shares({x.num: frozenset(cores) if x is m else x.cores for x in members})
        saved = sum((x.left_s if x is m else min(x.left_s, m.left_s)) * (1 - have[x.num] / after[x.num])
                    for x in members if x.left_s is not None)  # the others gain while it would have shared their cores
        fits = [g for g in m.reachable if m.gmis_per_gpu <= g <= len(cores)]
        gmis = max(fits, default=m.gmis_per_gpu)
        live = gmis == m.gmis_per_gpu and len(cores) == len(m.cores)  # a move: re-pinned where it runs, no restart
        if not live and saved <= payback * m.startup_core_s / len(cores):
            continue  # too little left to win back a restart
        return Growth(m.num, cores, gmis, tuple(sorted(m.cores - own)))
    return None
