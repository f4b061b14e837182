"""The commands that start a multi-node run, as ``mode=plan`` prints them.

Every node runs the same ``python -m gmiexp`` command with its own ``launch.node_rank``; under Slurm one
``srun`` line starts them all and each takes its rank from ``SLURM_NODEID``. The ``torchrun`` line is
what each node's gmiexp launcher does through torch.distributed.elastic (besides the backend's set-up,
heartbeats and summaries), for users who know that tool.

The node commands are the user's overrides with the node fields replaced, ``mode=plan`` dropped (the
nodes train), and a hardware preset dropped: a preset only plans, each node discovers its own GPUs.
The preset's network bandwidth is carried over as ``hardware.network_gbps``, so every node's
Algorithm 1 compares the same Table 2 figures as the plan did.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from gmiexp.hardware import PRESETS
from gmiexp.plan.model import Plan
from gmiexp.planner.nodes import endpoint_port

#: Overrides the node commands set themselves.
NODE_KEYS = ("launch.nnodes", "launch.node_rank", "launch.rdzv_endpoint")
#: Hardware overrides only a preset accepts (a node discovers its own hardware).
PRESET_ONLY_KEYS = ("hardware.mig",)
SLURM_HEAD = 'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)'


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _value(override: str) -> str:
    return override.split("=", 1)[1] if "=" in override else ""


def node_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """The user's overrides as every node passes them, and what was changed and why."""
    keep, dropped, notes = [], [], []
    preset = next((_value(o) for o in overrides if _key(o) == "hardware" and _value(o) in PRESETS), None)
    for o in overrides:
        key = _key(o)
        if key in NODE_KEYS or (key == "mode" and _value(o) == "plan"):
            continue
        if preset and (key == "hardware" or key in PRESET_ONLY_KEYS):
            dropped.append(o)
            continue
        keep.append(o)
    if preset:
        notes.append(f"{' '.join(dropped)} dropped: a preset only plans; each node discovers its own GPUs")
        net = PRESETS[preset].get("net")
        if net and not any(_key(o) == "hardware.network_gbps" for o in overrides):
            keep.append(f"hardware.network_gbps={net:g}")
            notes.append(f"hardware.network_gbps={net:g} added: {preset}'s network, so every node's Table 2 "
                         "matches this plan's")
    return keep, notes


def node_commands(plan: Plan, overrides: Sequence[str]) -> dict[str, Any]:
    """Per-node plain commands, the ``srun`` line and the ``torchrun`` equivalent of a run of ``plan.nnodes`` nodes.

    ``overrides``: the user's command-line overrides (Hydra's ``overrides.task``).
    """
    n = plan.nnodes
    endpoint = str(plan.launch.rdzv_endpoint)
    port = endpoint_port(endpoint)
    args, notes = node_overrides(overrides)
    base = " ".join(["python -m gmiexp", *(shlex.quote(a) for a in args)])
    plain = [f"{base} launch.nnodes={n} launch.node_rank={r} launch.rdzv_endpoint={shlex.quote(endpoint)}"
             for r in range(n)]
    # one run dir named by the job: every task (node) of the job and every requeue of it finds the same one
    srun = (f"{SLURM_HEAD}; srun --nodes={n} --ntasks-per-node=1 {base} launch.nnodes={n} "
            f"launch.rdzv_endpoint=$HEAD:{port} hydra.run.dir=outputs/{plan.experiment}/$SLURM_JOB_ID")
    torchrun = (f"torchrun --nnodes={n} --node-rank=$R --nproc-per-node={len(plan.local_gmis)} --rdzv-backend=c10d "
                f"--rdzv-endpoint={shlex.quote(endpoint)} --rdzv-id={shlex.quote(str(plan.launch.rdzv_id))} "
                "-m gmiexp.launch.worker $RUN_DIR/node$R/plan.yaml")
    return {"plain": plain, "srun": srun, "torchrun": torchrun, "notes": notes}


def format_commands(cmds: dict[str, Any], torchrun: bool = True) -> str:
    """Lines for ``mode=plan`` (stderr); ``torchrun``: what each node's launcher does (not a population's nodes)."""
    lines = ["per-node commands (run each on its node; node 0 hosts the rendezvous):"]
    lines += [f"  node {r}: {c}" for r, c in enumerate(cmds["plain"])]
    lines.append("under Slurm (one task per node; node_rank from SLURM_NODEID):")
    lines.append(f"  {cmds['srun']}")
    if torchrun:
        lines.append("what each node's launcher does, as torchrun (R = the node's rank, RUN_DIR = its run directory):")
        lines.append(f"  {cmds['torchrun']}")
    lines += [f"  note: {note}" for note in cmds["notes"]]
    return "\n".join(lines)
