"""A lower bound on a Plan's memory, checked against the host before launching (``num_envs=100000000`` exits 2).

The bound counts only what rl-games surely allocates per GMI for one rollout:
``horizon_length x num_envs`` steps of observations (float32, or bytes for uint8 frames),
actions (plus mean and std for continuous tasks; an index per discrete branch) and six per-step scalars (reward, value,
neglogp, done, return, advantage). Simulator state, the policy and the
training copies come on top, so a plan refused here could never have run;
one accepted may still be too big.

Several trainings on one GPU (a packed sweep's members, a population's) share its memory, and on a CPU host the
host's RAM: :func:`check_together` holds those running at once against it, each having passed alone.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gmiexp.envs import task_spaces
from gmiexp.errors import invalid
from gmiexp.hardware import Hardware
from gmiexp.plan import Plan
from gmiexp.shm.segment import amount

FLOAT_BYTES = 4
STEP_SCALARS = 6
GIB = 1 << 30
MIG_POOL = "MIG instance"  # a pool's name: a MIG instance's memory, each member's own


def bytes_per_env(plan: Plan) -> int:
    """Rollout bytes one environment of a GMI costs (see the module docstring)."""
    sp = task_spaces(plan.task)
    action_floats = 3 * sp.action_width if sp.continuous else sp.action_width
    return int(plan.train.horizon_length) * (sp.obs_bytes + FLOAT_BYTES * (action_floats + STEP_SCALARS))


def host_memory_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def pools(plan: Plan, hw: Hardware) -> dict[str, tuple[int, int]]:
    """Memory pool name -> (capacity bytes, environments in it): each GPU, or the host's RAM without GPUs.

    A GMI on an existing MIG instance (``backend=mig``) has the instance's memory, not its GPU's.
    """
    envs: dict[str, int] = defaultdict(int)
    capacity: dict[str, int] = {}
    gpus = {g.index: g for g in hw.gpus}
    migs = {d.uuid: d for g in hw.gpus for d in g.mig_devices}
    instance = {int(i["gmi"]): migs.get(str(i.get("uuid"))) for i in (plan.mig.instances if plan.mig else [])}
    for g in plan.gmis:
        gpu = gpus.get(g.device) if hw.has_gpu else None
        mig = instance.get(g.id)
        if mig is not None:
            name, cap = f"{MIG_POOL} {mig.profile} {mig.uuid} of GPU {mig.gpu_index}", mig.memory_mb << 20
        elif gpu is not None:
            name, cap = f"GPU {gpu.index} ({gpu.name})", gpu.memory_mb << 20
        else:
            name, cap = "host RAM", host_memory_bytes()
        capacity[name] = cap
        envs[name] += g.num_envs
    return {name: (capacity[name], envs[name]) for name in envs}


def check_footprint(plan: Plan, hw: Hardware) -> None:
    """Refuse (exit 2) a plan whose rollout buffers alone exceed a memory pool, with the estimate."""
    per_env = bytes_per_env(plan)
    for name, (cap, envs) in pools(plan, hw).items():
        need = per_env * envs
        if need > cap:
            gmis = sum(1 for g in plan.gmis if g.num_envs)
            biggest = max(g.num_envs for g in plan.gmis)
            fit = max(0, int(biggest * cap / need))
            raise invalid("num_envs", biggest, f"at most about {fit:,} per GMI on this host",
                          f"{envs:,} environments on {name} need at least {need / GIB:,.1f} GiB for rollout "
                          f"buffers alone ({per_env:,} bytes each: train.horizon_length="
                          f"{plan.train.horizon_length} steps of the task's observations, actions and "
                          f"six scalars; {gmis} GMI(s)); {name} has {cap / GIB:,.1f} GiB")


@dataclass(frozen=True)
class Shared:
    """One memory pool several trainings share at once: the largest of them, and their rollouts' lower bound."""

    pool: str
    capacity: int
    trainings: list[tuple[int, int, str]]  # (rollout bytes, largest num_envs a GMI, label) of each, largest first

    @property
    def need(self) -> int:
        return sum(b for b, _, _ in self.trainings)

    def format(self) -> str:
        n = len(self.trainings)
        return f"{self.pool}: {amount(self.need)} of {amount(self.capacity)}" + (f" ({n} at once)" if n > 1 else "")


def shared(plans: list[Plan], hw: Hardware, at_once: int, labels: list[str] | None = None) -> list[Shared]:
    """The memory pools the ``at_once`` largest of ``plans`` share, with their rollouts' lower bound.

    Each plan is one training as it runs, every one planned on the same slot (the tightest), so the pools they name
    are one: a GPU's memory, or the host's RAM without GPUs, which ``at_once`` of them share. A MIG instance is each
    member's own (:func:`check_footprint` held every member against it) and is left out. ``labels`` name each plan.
    """
    need: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    capacity: dict[str, int] = {}
    for k, plan in enumerate(plans):
        per_env = bytes_per_env(plan)
        for name, (cap, envs) in pools(plan, hw).items():
            if not name.startswith(MIG_POOL):
                capacity[name] = cap
                label = f"{labels[k]} " if labels else ""
                need[name].append((per_env * envs, max(g.num_envs for g in plan.gmis), label))
    return [Shared(name, capacity[name], sorted(each, key=lambda t: t[:2], reverse=True)[:at_once])
            for name, each in need.items()]


def check_together(plans: list[Plan], hw: Hardware, at_once: int, who: str, fixes: str,
                   labels: list[str] | None = None) -> None:
    """Refuse (exit 2) when the ``at_once`` largest of ``plans`` share a memory pool and overflow it (:func:`shared`).

    ``who`` names the trainings in the error, ``labels`` each one (``#3``); ``fixes`` says how to run fewer at once.
    """
    for s in shared(plans, hw, at_once, labels):
        top = s.trainings
        if len(top) > 1 and s.need > s.capacity:
            biggest = max(e for _, e, _ in top)
            fit = max(0, int(biggest * s.capacity / s.need))
            raise invalid("num_envs", biggest, f"at most about {fit:,} per GMI with {len(top)} trainings at once "
                          f"on {s.pool}, or {fixes}",
                          f"{who}: {len(top)} of them run at once on {s.pool} and need at least "
                          f"{s.need / GIB:,.1f} GiB for rollout buffers alone "
                          f"({', '.join(f'{lb}{b / GIB:,.1f}' for b, _, lb in top)} GiB); "
                          f"{s.pool} has {s.capacity / GIB:,.1f} GiB")
