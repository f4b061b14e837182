"""A lower bound on a Plan's memory, checked against the host before launching (``num_envs=100000000`` exits 2).

The bound counts only what rl-games surely allocates per GMI for one rollout:
``horizon_length x num_envs`` steps of observations (float32, or bytes for uint8 frames),
actions (plus mean and std for continuous tasks; an index per discrete branch) and six per-step scalars (reward, value,
neglogp, done, return, advantage). Simulator state, the policy and the
training copies come on top, so a plan refused here could never have run;
one accepted may still be too big.
"""

from __future__ import annotations

from collections import defaultdict

from gmiexp.envs import task_spaces
from gmiexp.errors import invalid
from gmiexp.hardware import Hardware
from gmiexp.plan import Plan

FLOAT_BYTES = 4
STEP_SCALARS = 6
GIB = 1 << 30


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
            name, cap = f"MIG instance {mig.profile} {mig.uuid} of GPU {mig.gpu_index}", mig.memory_mb << 20
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
