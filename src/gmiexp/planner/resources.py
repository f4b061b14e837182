"""What a Plan will put in ``/dev/shm`` and in its run directory, checked against the free space before launching.

tmpfs hands out a page only when it is first written, so a ``/dev/shm`` too small for the run used to show up
as a SIGBUS in the middle of it (a Docker container has 64 MiB by default); a full disk, as a torch writer error
at the first checkpoint. Both are known before anything starts: the sizes below follow the code that allocates
them (channel rings, reduction arenas, weight boards, replay stores, TDG's state rings; checkpoints and logs),
without importing torch, so ``mode=plan`` prints them. A ring's and a weight board's segment size is the one
their code creates them with (the torch-free :mod:`gmiexp.shm.ring_layout` and
:mod:`gmiexp.shm.board_layout`); what fills them (rows, a model's state) is estimated. The segments
are reserved when created (:func:`gmiexp.shm.segment.reserve`), which stays the exact check.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from gmiexp.envs import simulator, task_dims, task_spaces
from gmiexp.errors import ConfigError
from gmiexp.plan import Plan
from gmiexp.rl.rlgames.params import policy_param_count
from gmiexp.rl.rslrl.config import ROLE as RSLRL
from gmiexp.rl.rslrl.params import rslrl_sizes
from gmiexp.shm.board_layout import board_bytes
from gmiexp.shm.names import SHM_DIR
from gmiexp.shm.ring_layout import aligned_rows, ring_bytes
from gmiexp.shm.segment import amount

MIB = 1 << 20
PAGE = 4096
# measured on Cartpole/Ant runs, rounded up: a history row is 270-600 bytes, rl-games prints ~150 per epoch
LOG_BYTES_PER_EPOCH = 1024
LOG_BYTES_FIXED = 32 << 10  # per GMI: status, result, history and two log files, 4 KiB blocks each, and start-up
RUN_BYTES_FIXED = 128 << 10  # per node: .hydra/, plan.yaml, summary.json, the lock
CHECKPOINT_OVERHEAD = 16 << 10  # torch's zip container and pickled keys (a Cartpole checkpoint: 28 KiB)
# a GMI's record of the run in a checkpoint: torch's, numpy's and random's generators (16 KiB as torch.save writes
# them) and its counters; per environment, the episode's done flag, reward, shaped reward and length (13 bytes)
# and its index on the whole batch (a pickled int, 3-5 bytes)
GMI_RECORD_BYTES = 17 << 10
EPISODE_BYTES_PER_ENV = 13 + 5


@dataclass
class Need:
    """Bytes a run needs in one place, by item (for the message and ``mode=plan``)."""

    where: str
    items: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.items.values())

    def add(self, what: str, nbytes: int) -> None:
        if nbytes > 0:
            self.items[what] = self.items.get(what, 0) + int(nbytes)

    def include(self, other: Need) -> None:
        """Add ``other``'s items to these (several runs in one place: a population's members on one node)."""
        for what, nbytes in other.items.items():
            self.add(what, nbytes)

    def format(self) -> str:
        parts = ", ".join(f"{k} {amount(v)}" for k, v in self.items.items()) or "nothing"
        return f"{self.where}: {amount(self.total)} ({parts})"


def pages(nbytes: int) -> int:
    """What tmpfs gives a segment of ``nbytes``: whole pages."""
    return (nbytes + PAGE - 1) // PAGE * PAGE


def ring_segment(n_slots: int, slot_bytes: int) -> int:
    """What a slot ring takes in ``/dev/shm``: its segment (the ring's own layout), in whole pages."""
    return pages(ring_bytes(n_slots, slot_bytes))


def board_segment(nbytes: int) -> int:
    """What a weight board of ``nbytes`` states takes in ``/dev/shm``: its segment, in whole pages."""
    return pages(board_bytes(nbytes))


def _row_bytes(plan: Plan) -> dict[str, int]:
    """Bytes of one environment step per experience field (rl/rlgames/policy.py: experience_fields)."""
    obs, act = task_dims(plan.task)
    known = {"obs": 4 * obs, "actions": 4 * act if plan.task.continuous else 8, "rewards": 4, "values": 4,
             "dones": 1, "neglogp": 4}
    rows = {n: known[n] for n in plan.channel.fields if n in known}
    if plan.task.continuous:  # the behaviour's Gaussian, for rl-games' KL
        rows.update(mus=4 * act, sigmas=4 * act)
    rows.update(seq=8, version=8)
    return rows


def policy_sizes(plan: Plan) -> tuple[int, int]:
    """(parameters, normaliser floats) of the policy a GMI trains, as its trainer builds it.

    rl-games' from the task's network; rsl_rl's from its runner config's actor and critic. The parameters are
    also what a gradient reduction moves (the cost models' gradient size).
    """
    if plan.role == RSLRL:
        return rslrl_sizes(plan)
    obs, _ = task_dims(plan.task)
    return policy_param_count(plan), 2 * obs + 8


def state_bytes(plan: Plan) -> int:
    """The policy's state_dict: parameters and the observation/value normalisers, float32."""
    return 4 * sum(policy_sizes(plan))


def full_state_bytes(plan: Plan) -> int:
    """A policy's whole learning state in torch's container: weights and normalisers, Adam's two moments.

    What a checkpoint holds, and what a population's member publishes at each interval's end to exploit in place.
    """
    return 3 * state_bytes(plan) + CHECKPOINT_OVERHEAD


def shm_need(plan: Plan) -> Need:
    """What this node's GMIs put in ``/dev/shm`` at once (the segments live for the whole run)."""
    need = Need("/dev/shm")
    local = {g.id for g in plan.local_gmis}
    horizon = int(plan.train.horizon_length) + 1  # records per rollout: the steps and the bootstrap record
    experience = plan.channel is not None and plan.async_train is not None
    if experience:
        rows = _row_bytes(plan)
        widest = max(rows.values())
        for agent, _trainer in plan.channels:
            if agent not in local:
                continue
            n = plan.gmi(agent).num_envs or 1
            if str(plan.channel.name) == "uni":
                need.add("channels", ring_segment(int(plan.channel.slots) * len(rows), n * widest))
            else:
                per = aligned_rows(int(plan.channel.target_bytes) // widest, horizon * n)
                need.add("channels", sum(ring_segment(int(plan.channel.slots), per * b) for b in rows.values()))
        for t in {t for _, t in plan.channels if t in local}:
            need.add("weight boards", board_segment(state_bytes(plan)))
            if int(plan.async_train.replay_ratio) > 0:
                envs = max(plan.gmi(a).num_envs for a, tt in plan.channels if tt == t) or 1
                slot_rows = horizon * envs
                slots = max(1, int(plan.channel.store_capacity) // slot_rows)
                need.add("replay stores", slots * (slot_rows * sum(rows.values()) + 8) + 8 + 17 * slots)
    elif plan.role == "tdg":  # rl/experience/serving.py: a state ring and an action ring per pair, 2 slots each

        obs, act = task_dims(plan.task)
        for agent, sim in plan.channels:
            n = plan.gmi(sim).num_envs or 1
            if sim in local:
                need.add("TDG rings", ring_segment(2, n * (obs + 2) * 4))
            if agent in local:
                need.add("TDG rings", ring_segment(2, n * (4 * act if plan.task.continuous else 8)))
    trainers = [t for t in plan.trainer_group if t in local]
    if str(plan.reduction) in ("mpr", "har") and len(trainers) > 1:
        grad = pages(state_bytes(plan))
        key = (lambda g: g.node) if str(plan.reduction) == "mpr" else (lambda g: (g.node, g.device))
        groups: dict[object, int] = {}
        for t in trainers:
            groups[key(plan.gmi(t))] = groups.get(key(plan.gmi(t)), 0) + 1
        for n in groups.values():
            if n > 1:
                need.add("reduction arenas", pages(64 * (1 + n)) + (n + 1) * grad)
    return need


def checkpoint_bytes(plan: Plan) -> int:
    """One checkpoint: the learning state and, for PPO in tcg_ex, every GMI's record of the run.

    A record (:mod:`gmiexp.rl.rlgames.runstate`, :mod:`gmiexp.rl.rslrl.runstate`) holds its generators and, per
    environment, the current observation, the running episode's sums, its index on the whole batch and the
    simulator's state where the simulator saves one (its size where the simulator knows it before it is built:
    :meth:`gmiexp.envs.Simulator.saved_state_bytes`); rl-games adds GMI 0's simulator state again (``env_state``).
    Recurrent states are not counted.
    """
    nbytes = full_state_bytes(plan)
    if plan.layout != "tcg_ex" or plan.role not in ("ppo", RSLRL):  # rl-games' PPO role, rsl_rl's
        return nbytes
    sim = simulator(plan.task)
    per_env = task_spaces(plan.task).obs_bytes + EPISODE_BYTES_PER_ENV
    for g in plan.gmis:
        nbytes += GMI_RECORD_BYTES + g.num_envs * per_env + sim.saved_state_bytes(plan.task, g.num_envs)
    if plan.role == "ppo":
        nbytes += sim.saved_state_bytes(plan.task, plan.gmis[0].num_envs)
    return nbytes


def disk_need(plan: Plan) -> Need:
    """What this node's run directory gains: GMI 0's checkpoints (node 0) and every local GMI's logs."""
    need = Need("run directory")
    epochs = int(plan.max_iterations)
    if plan.node_rank == 0:
        ckpt = checkpoint_bytes(plan)
        freq = int(plan.train.save_frequency)
        count = 2 + (epochs // freq if freq > 0 else 0)  # rl-games: best and last, plus every save_frequency
        need.add("checkpoints", count * ckpt)
    need.add("logs", RUN_BYTES_FIXED + len(plan.local_gmis) * (LOG_BYTES_FIXED + LOG_BYTES_PER_EPOCH * epochs))
    return need


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on ``path``'s file system (its nearest existing parent)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    st = os.statvfs(p)
    return st.f_bavail * st.f_frsize


MORE_SHM = ("more shared memory (docker run --shm-size=1g, podman --shm-size, a Kubernetes emptyDir with medium: "
            "Memory)")
SHM_FIXES = f"{MORE_SHM}, or smaller channel.slots / channel.target_bytes / channel.store_capacity"
DISK_FIXES = "a run dir with more space (hydra.run.dir=...), fewer checkpoints (train.save_frequency=0) or fewer " \
             "max_iterations"


def check_resources(plan: Plan, run_dir: Path, shm_dir: Path | None = None) -> None:
    """Refuse (exit 2) a plan whose shared memory or files do not fit the free space, naming both and the fixes."""
    check_space(shm_need(plan), disk_need(plan), run_dir, shm_dir=shm_dir)


def check_space(shm: Need, disk: Need, run_dir: Path, *,
                who: tuple[str, str] = ("this plan needs", "this run will write"), shm_fixes: str = SHM_FIXES,
                disk_fixes: str = DISK_FIXES, shm_dir: Path | None = None) -> None:
    """Refuse (exit 2) needs that do not fit the free space of ``/dev/shm`` and of ``run_dir``'s file system.

    ``who``: whose needs they are, as the two messages say it (a run's own plan by default).
    """
    if shm.total:
        free = free_bytes(shm_dir or SHM_DIR)
        if shm.total > free:
            raise ConfigError(f"{shm_dir or SHM_DIR} has {amount(free)} free; {who[0]} about {shm.format()}; "
                              f"valid: {shm_fixes}")
    free = free_bytes(run_dir)
    if disk.total > free:
        raise ConfigError(f"run directory {run_dir} has {amount(free)} free; {who[1]} about {disk.format()}; "
                          f"valid: {disk_fixes}")
