"""Where a population's members run: this node's pack slots, a member's config on its slot, ``mode=plan``'s view.

Members are placed in blocks of nodes (:func:`gmiexp.pbt.members.place`) and, on each node, on the pack launcher's
slots (:mod:`gmiexp.pack.slots`): ``ceil(members here / GPUs)`` per GPU, all at once (they compare at intervals),
each a core set on a CPU host, an MPS share of the GPU's one shared daemon or a MIG instance. A member's process
composes the user's overrides with its slot's, so the controller and ``mode=plan`` plan it the same way
(:func:`member_config`) before any member starts.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from gmiexp.backends import mps_daemon, mps_session
from gmiexp.backends.common import visible_device
from gmiexp.config import Config
from gmiexp.config.compose import compose_config
from gmiexp.errors import ConfigError
from gmiexp.hardware import Hardware, resolve
from gmiexp.pack import slots
from gmiexp.pbt.members import (
    member_overrides,
    objective_overrides,
    per_node,
    place,
    starting_values,
    with_values,
)
from gmiexp.pbt.rules import member_seed
from gmiexp.plan import Plan
from gmiexp.planner.build import check_cpus
from gmiexp.planner.footprint import check_together, shared
from gmiexp.planner.resources import (
    MORE_SHM,
    Need,
    check_space,
    checkpoint_bytes,
    disk_need,
    full_state_bytes,
    pages,
    shm_need,
)
from gmiexp.rl.rslrl.config import ROLE as RSLRL


@dataclass
class Placement:
    """One node's slots for its members: the GPUs, slots per GPU, the slots, what a member needs of a slot."""

    hw: Hardware
    gpus: list[int]
    per_gpu: int
    pool: list[slots.Slot]
    member_of: slots.Member

    def overrides(self, slot: slots.Slot) -> list[str]:
        return slots.slot_overrides(slot, self.member_of, self.per_gpu)

    def shared_daemons(self) -> AbstractContextManager[None]:
        """An MPS GPU's one shared daemon for the node's members (as the pack launcher holds it for a sweep)."""
        gpus = slots.mps_gpus(self.hw, self.gpus, [self.member_of])
        if not gpus:
            return nullcontext()
        return mps_session.running([mps_daemon.shared_daemon(visible_device(self.hw, g)) for g in gpus])


def placement(cfg: Config, overrides: list[str], *, planning: bool = False) -> Placement:
    """The slots of this node for its share of the population (every node builds its own on its own hardware).

    ``planning``: ``mode=plan``, where a hardware preset stands for the node (a population to run needs the host's).
    """
    assert cfg.pbt is not None
    hw = resolve(cfg.hardware.name)
    if hw.is_preset and not planning:
        raise ConfigError(f"invalid hardware={cfg.hardware.name} for a pbt run: presets only plan; valid: auto, cpu")
    # the command's hardware.gpus (a GPU host) or hardware.cpus (a CPU host) bound where the population runs
    gpus = slots.choose_gpus(hw, cfg.hardware.gpus if hw.has_gpu else None, key="hardware.gpus")
    here = per_node(cfg.pbt.population, int(cfg.launch.nnodes))
    per_gpu = math.ceil(here / len(gpus))  # every member at once: they compare at intervals
    backend = next((o.split("=", 1)[1] for o in reversed(overrides) if o.startswith("backend=")), None)
    cores = None if hw.has_gpu else cfg.hardware.cpus
    if cores is not None:  # the cores the members share, as a run's own hardware.cpus
        check_cpus(cores)
    pool = slots.make_slots(hw, gpus, per_gpu, cores)
    member = slots.Member(backend, cfg.gmis_per_gpu)
    slots.check_sharing(hw, gpus, per_gpu, [member])
    return Placement(hw, gpus, per_gpu, pool, member)


def members_here(cfg: Config) -> int:
    """How many of the population's members this node (``launch.node_rank``) runs."""
    assert cfg.pbt is not None
    node = int(cfg.launch.node_rank or 0)
    return sum(1 for n, _ in place(cfg.pbt.population, int(cfg.launch.nnodes)) if n == node)


def member_config(cfg: Config, overrides: list[str], slot_overrides: list[str], member: int,
                  values: dict) -> Config:
    """Member ``member``'s Config as its process composes it on a slot (a run of one node).

    The user's overrides less what the controller sets, its objective's, the slot's, its seed, then its values.
    """
    assert cfg.pbt is not None
    composed = compose_config(*member_overrides(overrides), *objective_overrides(cfg.pbt.objective),
                              *slot_overrides, f"seed={member_seed(cfg.seed, member)}")
    return with_values(composed, values)


#: a member's states in /dev/shm at once in place: the one it published last (held until every decision on its
#: interval is made and every exploit of it taken) and the next, or a leader's state relayed from another node
STATES_PER_MEMBER = 2


def space(cfg: Config, plans: list[Plan]) -> tuple[Need, Need]:
    """What this node's members (``plans``: each as it runs) need at once in ``/dev/shm`` and in the run dir.

    Each member's own run, and in place its published states. A restart exploit's new life writes its own
    checkpoints besides: the run dir's figure is the first lives'.
    """
    assert cfg.pbt is not None
    shm, disk = Need("/dev/shm"), Need("run directory")
    for plan in plans:
        shm.include(shm_need(plan))
        disk.include(disk_need(plan))
        if cfg.pbt.exploit == "inplace":
            shm.add("published states", STATES_PER_MEMBER * pages(full_state_bytes(plan)))
    if plans:
        disk.add("the population's best policy", checkpoint_bytes(plans[0]))  # a copy of its checkpoint
    return shm, disk


FEWER = "fewer members a node (pbt.population, launch.nnodes)"


def check_memory_here(plans: list[Plan], place_here: Placement, labels: list[str] | None = None) -> None:
    """Refuse (exit 2) this node's members (``plans``, on one slot) whose rollouts overflow the memory they share.

    Every member runs at once: ``place_here.per_gpu`` share a GPU's memory, or all share the host's RAM.
    """
    gpu = place_here.hw.has_gpu
    members = f"this node's {len(plans)} member{'s' if len(plans) != 1 else ''}"
    check_together(plans, place_here.hw, at_once(plans, place_here), members,
                   f"{FEWER} or more GPUs (hardware.gpus)" if gpu else FEWER, labels)


def at_once(plans: list[Plan], place_here: Placement) -> int:
    """The members sharing one memory pool: ``per_gpu`` a GPU, or every one the host's RAM."""
    return place_here.per_gpu if place_here.hw.has_gpu else len(plans)


def memory_here(plans: list[Plan], place_here: Placement) -> str:
    """``mode=plan``'s memory line: the rollouts of the members sharing each pool, against it."""
    return "; ".join(m.format() for m in shared(plans, place_here.hw, at_once(plans, place_here)))


def check_space_here(cfg: Config, plans: list[Plan], run_dir: Path, place_here: Placement,
                     labels: list[str] | None = None) -> None:
    """Refuse (exit 2) a node whose members together overflow its memory, ``/dev/shm`` or run dir, before any starts.

    Each member's own check sees the space free when it starts, not what the others take after.
    """
    check_memory_here(plans, place_here, labels)
    shm, disk = space(cfg, plans)
    members = f"this node's {len(plans)} member{'s' if len(plans) != 1 else ''}"
    fixes = f"{MORE_SHM}, {FEWER} or pbt.exploit=restart (states through checkpoint files)"
    check_space(shm, disk, run_dir, who=(f"{members} need", f"{members} will write"), shm_fixes=fixes)


def describe(cfg: Config, place_here: Placement) -> str:
    """The population in a few lines (``mode=plan`` prints it on stderr): each member's node, slot and values.

    A member on another node is shown on the slot of its index there as this node's hardware would give it.
    """
    assert cfg.pbt is not None
    p = cfg.pbt
    lines = [f"pbt: {p.population} members, rule {p.replace_rule}, every {p.interval_steps} env steps, objective "
             f"{p.objective}, exploit {p.exploit}; mutating {', '.join(p.mutation)} (rate {p.mutation_rate})",
             f"  slots: {_slots(place_here)}" + (" on each node (as this node's hardware gives them)"
                                                   if cfg.launch.nnodes > 1 else "")]
    where = place(p.population, int(cfg.launch.nnodes))
    for m, values in enumerate(starting_values(cfg)):
        node, index = where[m]
        slot = place_here.pool[index]
        shown = ", ".join(f"{k}={_fmt(v)}" for k, v in values.items())
        at = f"node {node}, " if cfg.launch.nnodes > 1 else ""
        lines.append(f"  member {m} ({at}{slot.name}: {' '.join(place_here.overrides(slot))}): {shown}")
    trainer = "rsl_rl's PPO" if cfg.role == RSLRL else "rl-games' PPO"
    lines.append(f"  (mode=train runs them as {trainer} in tcg_ex, exploiting {p.exploit}; docs/pbt.md)")
    return "\n".join(lines)


def _slots(place_here: Placement) -> str:
    n = len(place_here.gpus)
    gpus = f"GPU{'s' if n > 1 else ''} {', '.join(map(str, place_here.gpus))}" if place_here.hw.has_gpu else \
        f"{n} logical GPU{'s' if n > 1 else ''} (CPU cores {', '.join(map(str, sorted(set(_cores(place_here)))))})"
    return f"{place_here.per_gpu} per GPU on {gpus}"


def _cores(place_here: Placement) -> list[int]:
    return [c for slot in place_here.pool for c in slot.cpus]


def _fmt(value: object) -> str:
    return "recipe" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
