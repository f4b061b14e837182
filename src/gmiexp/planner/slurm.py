"""A node launcher as a Slurm task: the rendezvous endpoint from the job's node list, the allocation checked.

Under Slurm every node's launcher is one task of one job step (``srun``, or hydra-submitit-launcher's
``gmiexp_slurm`` launcher, which submits ``launch.nnodes`` nodes with one task each). When the node rank
comes from ``SLURM_NODEID`` and no ``launch.rdzv_endpoint`` is given, node 0 is the step's first host
(parsed by submitit, as its ``JobEnvironment.hostnames`` does) and the port is derived from the job id the
way submitit's ``TorchDistributedEnvironment`` derives its master port: every task computes the same one,
and two jobs sharing a head node rarely meet on it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from gmiexp.config import LaunchConfig
from gmiexp.errors import ConfigError, invalid

#: the port range submitit's TorchDistributedEnvironment draws from (seeded by the job id)
PORTS = (20000, 60000)


def nodelist(env: Mapping[str, str]) -> str:
    """The step's node list under ``srun`` (SLURM_STEP_NODELIST), else the job's (SLURM_JOB_NODELIST)."""
    return (env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "").strip()


def job_id(env: Mapping[str, str]) -> str:
    """The job id as submitit names it: ``<array job>_<array task>`` for an array task, else SLURM_JOB_ID."""
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    return env.get("SLURM_JOB_ID", "")


def head_endpoint(env: Mapping[str, str]) -> str | None:
    """``<first host of the step>:<port from the job id>``; None outside a Slurm job."""
    from submitit.slurm.slurm import SlurmParseException, _parse_node_list  # JobEnvironment.hostnames' parser

    nodes = nodelist(env)
    if not nodes:
        return None
    try:
        head = _parse_node_list(nodes)[0]
    except (SlurmParseException, IndexError):
        raise invalid("SLURM_JOB_NODELIST", nodes, "a Slurm node list such as node[001-004]",
                      "give launch.rdzv_endpoint=<node 0>:<port>") from None
    return f"{head}:{random.Random(job_id(env)).randint(*PORTS)}"


def check_step(launch: LaunchConfig, env: Mapping[str, str]) -> None:
    """One task per node and ``launch.nnodes`` nodes in this step, or exit 2 before anything starts.

    Two tasks on one node would both claim its ``SLURM_NODEID``; a step smaller than ``launch.nnodes`` would
    leave the rendezvous waiting for nodes that never come (``launch.nnodes`` swept under submitit: every
    member of a sweep is submitted with the node count of the sweep's own config).
    """
    n = int(launch.nnodes)
    nodes, tasks = env.get("SLURM_STEP_NUM_NODES", "").strip(), env.get("SLURM_STEP_NUM_TASKS", "").strip()
    if nodes and int(nodes) != n:
        raise ConfigError(f"invalid launch.nnodes={n} for this Slurm step of {nodes} node(s) (SLURM_STEP_NUM_NODES); "
                          f"valid: {nodes}, or ask Slurm for {n} nodes (hydra/launcher=gmiexp_slurm submits "
                          "launch.nnodes nodes; launch.nnodes cannot be swept under submitit: one submission "
                          "serves every member)")
    if tasks and int(tasks) != n:
        raise ConfigError(f"invalid Slurm step: {tasks} tasks (SLURM_STEP_NUM_TASKS) for launch.nnodes={n}; valid: "
                          f"one task per node ({n}): srun --ntasks-per-node=1, hydra.launcher.tasks_per_node=1")
