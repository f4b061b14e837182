"""The nodes of a run: which node this launcher is, and the GMIs of every node.

Nodes are homogeneous. Every node runs the same command, builds the same
single-node layout on its own hardware and realises it with its own backend
(its MPS daemons, its MIG instances); :func:`replicate` then numbers the GMIs
of all nodes node-major, so GMI ``n * k + i`` is GMI ``i`` of node ``n``
(``k`` GMIs per node) on the same local device. Each node's Plan differs from
the others' only in ``launch.node_rank`` and in what its backend realised.

The node's rank is the user's (``launch.node_rank``) or the scheduler's
(Slurm's ``SLURM_NODEID``, torchrun's ``PET_NODE_RANK``), never the
rendezvous's: c10d ranks agents by host name and pid, and GMI ids must not
depend on which node reached the rendezvous first. A Slurm task without an
endpoint meets the others on the step's first host (:mod:`gmiexp.planner.slurm`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from gmiexp.config import LaunchConfig
from gmiexp.errors import ConfigError, invalid
from gmiexp.plan.model import Plan
from gmiexp.planner.slurm import check_step, head_endpoint

#: Where a node's rank comes from when ``launch.node_rank`` is not given, first match wins.
NODE_RANK_ENV = ("SLURM_NODEID", "PET_NODE_RANK")
#: Where the rendezvous id comes from when ``launch.rdzv_id`` is not given (every node must agree).
RDZV_ID_ENV = ("SLURM_JOB_ID", "PET_RDZV_ID")
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def endpoint_host(endpoint: str) -> str:
    return endpoint.rsplit(":", 1)[0]


def endpoint_port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def resolve_nodes(launch: LaunchConfig, env: Mapping[str, str] | None = None) -> LaunchConfig:
    """Fill ``node_rank``, ``rdzv_id`` and ``local_addr`` from the scheduler's variables; check the node fields.

    Raises ConfigError (exit 2) naming the bad field: a rank outside ``0..nnodes-1``, a missing
    ``rdzv_endpoint`` with more than one node (a Slurm task takes its step's first host), a Slurm step
    that is not one task on each of ``nnodes`` nodes, a port outside 1..65535, ``inprocess`` across nodes.
    """
    env = os.environ if env is None else env
    n = int(launch.nnodes)
    source = "launch.node_rank"
    if launch.node_rank is None:
        var = next((v for v in NODE_RANK_ENV if env.get(v, "").strip()), None)
        if var == "SLURM_NODEID":  # one task on each of nnodes nodes (one node too), or tasks share a run dir
            check_step(launch, env)
        if var is not None and n > 1:
            source = var
            try:
                launch.node_rank = int(env[var])
            except ValueError:
                raise invalid(var, env[var], "an integer node rank") from None
        else:
            launch.node_rank = 0
    if not 0 <= launch.node_rank < n:
        raise invalid(source, launch.node_rank, f"0..{n - 1} (launch.nnodes={n})")
    if n == 1:
        return launch
    if source == "SLURM_NODEID":  # a Slurm task: node 0 is the step's first host
        launch.rdzv_endpoint = launch.rdzv_endpoint or head_endpoint(env)
    if not launch.rdzv_endpoint:
        raise ConfigError(f"invalid launch.rdzv_endpoint=null with launch.nnodes={n}: every node must meet at "
                          "node 0's rendezvous store; valid: host:port of node 0, e.g. "
                          "launch.rdzv_endpoint=node001:29400 (127.0.0.1:29400 for nodes on one host)")
    port = endpoint_port(launch.rdzv_endpoint)
    if not 1 <= port <= 65535:
        raise invalid("launch.rdzv_endpoint port", port, "1..65535")
    if launch.inprocess:
        raise invalid("launch.inprocess", True, f"false with launch.nnodes={n} (one process per GMI on every node)")
    if launch.rdzv_id is None:
        var = next((v for v in RDZV_ID_ENV if env.get(v, "").strip()), None)
        launch.rdzv_id = env[var].strip() if var else "gmiexp"
    if launch.local_addr is None and endpoint_host(launch.rdzv_endpoint) in LOOPBACK:
        launch.local_addr = "127.0.0.1"  # nodes on one host: keep every connection on loopback
    return launch


def replicate(plan: Plan) -> Plan:
    """Number every node's GMIs node-major from this node's single-node Plan (a no-op for one node).

    Trainer group and channels are repeated per node; the backend state (``plan.mps``/``plan.mig``) stays this
    node's, and each node's GMIs carry the environment its own backend realised for the same local GMI.
    """
    n = plan.nnodes
    if n == 1:
        return plan
    base, k = plan.gmis, len(plan.gmis)
    if any(g.node for g in base):
        raise ConfigError("replicate() expects a single-node plan")
    plan.gmis = [dataclasses.replace(g, id=node * k + g.id, node=node, roles=list(g.roles), env=dict(g.env),
                                     cpus=None if g.cpus is None else list(g.cpus))
                 for node in range(n) for g in base]
    plan.trainer_group = [node * k + t for node in range(n) for t in plan.trainer_group]
    plan.channels = [[node * k + a, node * k + t] for node in range(n) for a, t in plan.channels]
    for inst in plan.mig.instances if plan.mig else []:  # this node's instances serve this node's GMIs
        inst["gmi"] += plan.node_rank * k
    return plan


def gmi_for_local_rank(plan: Plan, local_rank: int) -> int:
    """The global GMI id of the ``local_rank``-th process an elastic agent starts on this node."""
    local = plan.local_gmis
    if not 0 <= local_rank < len(local):
        raise invalid("LOCAL_RANK", local_rank, f"0..{len(local) - 1} (GMIs on node {plan.node_rank})")
    return local[local_rank].id


GMI_COUNT = "GMIs (world size)"
#: What may differ between the nodes' Plans: the node's own rank, address, run dir and resume state, what
#: its backend and host realised (GMI environments, shares, core sets and threads; MPS/MIG; set-up commands),
#: and how its own launcher watches and waits (its clock, its progress output).
NODE_OWN = ("run_dir", "checkpoint", "resumed", "hardware", "mps", "mig", "setup_commands", "teardown_commands",
            "backend_reason", "reduction_reason", "notes", "launch.node_rank", "launch.local_addr", "launch.resume",
            "launch.monitor_interval_s", "launch.progress", "launch.progress_interval_s",
            "launch.heartbeat_timeout_s", "launch.rdzv_timeout_s")
GMI_SHARED = ("device", "roles", "local_index", "node")  # with num_envs; a GMI's other fields are its host's


def _flat(d: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(d, dict) and d:
        for k, v in d.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    else:
        out[prefix] = d


def shared_fields(plan: Plan) -> dict[str, Any]:
    """The Plan's fields every node must agree on, flat (``train.gamma``), JSON-ready.

    GMIs are summarised by what the command chose: their count, the GMIs on each GPU of a node and each
    GMI's environments, then each GMI's placement (``gmis[*].<field>``, one list over the GMIs).
    """
    d = plan.to_dict()
    gmis = d.pop("gmis")
    out: dict[str, Any] = {}
    _flat(d, "", out)
    for key in NODE_OWN:
        for k in [k for k in out if k == key or k.startswith(key + ".")]:
            del out[k]
    local = [g for g in gmis if g["node"] == 0]
    out[GMI_COUNT] = len(gmis)
    out["GMIs per GPU (gmis_per_gpu)"] = [sum(1 for g in local if g["device"] == dev)
                                          for dev in sorted({g["device"] for g in local})]
    out["num_envs per GMI"] = [g["num_envs"] for g in gmis]
    for f in GMI_SHARED:
        out[f"gmis[*].{f}"] = [g[f] for g in gmis]
    return out



def disagreement(fields: Mapping[int, Mapping[str, Any]]) -> list[str]:
    """``'<field>: node 0 <value>, node 1 <value>'`` for every field whose value is not the same on every node."""
    nodes = sorted(fields)
    keys = sorted({k for n in nodes for k in fields[n]}, key=lambda k: (not k[0].isupper(), k))
    if len({fields[n].get(GMI_COUNT) for n in nodes}) > 1:  # then whatever lists GMIs differs too: say it once
        keys = [k for k in keys if not k.startswith("gmis[*].") and k not in ("trainer_group", "channels")]
    lines = []
    for k in keys:
        values = [fields[n].get(k, "<absent>") for n in nodes]
        if any(v != values[0] for v in values[1:]):
            lines.append(f"{k}: " + ", ".join(f"node {n} {_short(v)}" for n, v in zip(nodes, values, strict=True)))
    return lines


def _short(v: Any) -> str:
    text = str(v)
    return text if len(text) <= 60 else text[:57] + "..."
