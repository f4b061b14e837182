"""The paper's Table 2: time complexity of MPR, MRR and HAR, with bandwidths measured or assumed.

``t`` is the number of trainer GMIs per GPU (the largest count on uneven
layouts, which bounds the slowest GPU), ``g`` the number of GPUs of a node,
``N`` the number of nodes (``G = N g`` GPUs in all), ``Mp`` the gradient size
in bytes (float32 parameters x 4), ``B1`` the inter-GMI bandwidth through
host shared memory, ``B2`` the inter-GPU (NCCL) bandwidth inside a node and
``B3`` one node's network bandwidth, all in bytes/s. One node (the paper)::

    MPR  2 (g t - 1) Mp / (g t B1)
    MRR  2 (g - 1) (t + 1) Mp / (g B2)            (only while t <= g, even)
    HAR  2 (g - 1) Mp / (g B2) + 2 (t - 1) Mp / (t B1)

Across nodes (gmiexp's inter-node term; the paper is written for one node)::

    MPR  n/a: shared memory does not cross nodes
    MRR  2 (G - 1) (t + 1) Mp / (G min(B2, B3))    (t <= G, even): every ring
         crosses every node boundary, so the t rings and the representatives'
         pass share each node's network port, the slowest link of the ring
    HAR  2 (g - 1) Mp / (g B2) + 2 (t - 1) Mp / (t B1)
         + 2 (N - 1) Mp / (N B3) + Mp / B2 (g > 1): one node leader per node
         all-reduces over the network, then broadcasts to its node's GPU leaders

Both reduce to the paper's rows for N = 1. Every term is linear in ``Mp``, so
which strategy is fastest does not depend on the model's size.

Without calibration the defaults are used: ``B1`` = 5 GB/s (one core
copying through host DRAM) and ``B2`` = 100 GB/s on a GPU host (NVLink
class; PCIe hosts are nearer 10) or 1 GB/s on a CPU-only host (gloo over
loopback TCP, which stands in for NCCL there). ``B3`` is the hardware
description's ``network_gbps`` / 8 (presets carry one, ``hardware.network_gbps``
sets it); unknown, it is assumed: 100 Gb/s on a GPU host, ``B2`` on a CPU-only
host (nodes there talk gloo over TCP, as its GPUs do). :func:`gmiexp.comm.reduction.calibrate.calibrate` measures
``B1`` and ``B2`` in about a second: ``B1`` by timing a 2-member shared-memory
reduction (threads) and inverting the MPR row (``Mp / time`` for g t = 2);
``B2`` by a device-to-device copy between GPUs 0 and 1 when there are two,
else by pushing bytes through a loopback TCP connection (gloo's transport).
``B3`` is never measured: the other nodes are not there when a node plans,
and Algorithm 1 must pick the same strategy on every node.
"""

from __future__ import annotations

from typing import Any

from gmiexp.costmodel.algorithm1 import mrr_limit
from gmiexp.plan import Plan

GB = 1e9
DEFAULT_B1 = 5 * GB
DEFAULT_B2_GPU = 100 * GB
DEFAULT_B2_CPU = 1 * GB
DEFAULT_NETWORK_GBPS_GPU = 100.0  # assumed when a GPU host's network is not described (EDR IB / 100 GbE)
STRATEGIES = ("mpr", "mrr", "har")
TABLE7_PARAMS = (110_000, 290_000, 1_500_000)  # AT, HM, SH


def complexities(t: int, g: int, mp_bytes: float, b1: float, b2: float, nodes: int = 1,
                 b3: float | None = None) -> dict[str, float | None]:
    """Seconds per reduction of each strategy by Table 2 (``g`` GPUs per node; ``b3`` needed when nodes > 1).

    None: the strategy cannot cross nodes (MPR).
    """
    if nodes == 1:
        mpr = 2 * (g * t - 1) * mp_bytes / (g * t * b1)
        mrr = 2 * (g - 1) * (t + 1) * mp_bytes / (g * b2)
        har = 2 * (g - 1) * mp_bytes / (g * b2) + 2 * (t - 1) * mp_bytes / (t * b1)
        return {"mpr": mpr, "mrr": mrr, "har": har}
    if b3 is None:
        raise ValueError("complexities across nodes needs the network bandwidth b3")
    big_g = nodes * g
    mrr = 2 * (big_g - 1) * (t + 1) * mp_bytes / (big_g * min(b2, b3))
    har = (2 * (g - 1) * mp_bytes / (g * b2) + 2 * (t - 1) * mp_bytes / (t * b1)
           + 2 * (nodes - 1) * mp_bytes / (nodes * b3) + (mp_bytes / b2 if g > 1 else 0.0))
    return {"mpr": None, "mrr": mrr, "har": har}


def network_part(t: int, g: int, mp_bytes: float, nodes: int, b3: float) -> dict[str, float | None]:
    """Seconds each strategy keeps a node's network port busy (the inter-node part of :func:`complexities`)."""
    if nodes == 1:
        return {"mpr": 0.0, "mrr": 0.0, "har": 0.0}
    big_g = nodes * g
    return {"mpr": None, "mrr": 2 * (big_g - 1) * (t + 1) * mp_bytes / (big_g * b3),
            "har": 2 * (nodes - 1) * mp_bytes / (nodes * b3)}


def shape(plan: Plan) -> tuple[int, int, int, list[int]]:
    """(t, g per node, nodes, GMIs on each GPU) of the plan's trainer layout; nodes are homogeneous."""
    per_node = plan.node_map(plan.trainer_group)
    counts = [len(li) for node in per_node for li in node]
    nodes = max(len(per_node), 1)
    g = max((len(node) for node in per_node), default=0)
    return (max(counts) if counts else 0), g, nodes, counts


def _host(plan: Plan) -> dict[str, Any]:
    return plan.hardware if isinstance(plan.hardware, dict) else {}


def defaults(plan: Plan) -> dict[str, Any]:
    gpu = bool(_host(plan).get("gpus"))
    b2 = DEFAULT_B2_GPU if gpu else DEFAULT_B2_CPU
    where = "GPU host (NVLink class)" if gpu else "CPU host (gloo over loopback)"
    return {"B1": DEFAULT_B1, "B2": b2, "source": f"defaults for a {where}; set reduction.calibrate=true to measure"}


def network(plan: Plan, b2: float) -> dict[str, Any]:
    """``B3`` (bytes/s) from the hardware description, or the assumed value and why."""
    gbps = _host(plan).get("network_gbps")
    if gbps:
        src = _host(plan).get("source", "")
        return {"B3": gbps * 1e9 / 8, "network_source": f"network {gbps:g} Gb/s per node ({src or 'hardware'})"}
    if _host(plan).get("gpus"):
        return {"B3": DEFAULT_NETWORK_GBPS_GPU * 1e9 / 8,
                "network_source": f"network not described: assumed {DEFAULT_NETWORK_GBPS_GPU:g} Gb/s per node; "
                                  "set hardware.network_gbps"}
    return {"B3": b2, "network_source": "network not described: assumed B2 (gloo over TCP between CPU hosts); "
                                        "set hardware.network_gbps"}


def estimate_s(plan: Plan, mp_bytes: float = 1.0) -> dict[str, float | None]:
    """Table 2 for the plan's trainer layout with the bandwidths of its hardware description (no measurement).

    What Algorithm 1 compares across nodes: every node computes the same figures from the same description.
    """
    t, g, nodes, _ = shape(plan)
    bw = defaults(plan)
    return complexities(t, max(g, 1), mp_bytes, bw["B1"], bw["B2"], nodes, network(plan, bw["B2"])["B3"])


def reduction_cost(
    plan: Plan,
    params: int | None = None,
    bandwidth: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Table 2 for the plan's trainer layout, as a dict for ``plan.notes["reduction_cost"]``.

    ``params``: policy parameters (float32); None gives the paper's Table 7
    sizes. ``bandwidth``: ``{"B1": bytes/s, "B2": bytes/s, "source": str}``, a measurement
    (:func:`gmiexp.comm.reduction.calibrate.calibrate`); None takes the defaults.
    """
    mpl = plan.gpu_map(plan.trainer_group)
    if not mpl:  # serving layouts: no trainer GMIs, nothing is ever reduced
        return {"table": "paper Table 2 (ms per reduction)", "t": 0, "g": 0, "gmis_per_gpu": [],
                "mrr_limit": "no trainers", "estimate_ms": {}}
    t, g_node, nodes, counts = shape(plan)
    bw = bandwidth or defaults(plan)
    net = network(plan, bw["B2"]) if nodes > 1 else None
    why_not_mrr = mrr_limit(mpl)
    sizes = [params] if params else list(TABLE7_PARAMS)
    est: dict[str, dict[str, Any]] = {}
    for p in sizes:
        b3 = net["B3"] if net else None
        c = complexities(t, max(g_node, 1), 4 * p, bw["B1"], bw["B2"], nodes, b3)
        row: dict[str, Any] = {k: None if v is None else round(v * 1e3, 4) for k, v in c.items()}
        if why_not_mrr:
            row["mrr"] = None
        row["fastest"] = min((k for k in STRATEGIES if row[k] is not None), key=lambda k: row[k])
        if net:
            part = network_part(t, max(g_node, 1), 4 * p, nodes, net["B3"])
            row["network_ms"] = {k: round(v * 1e3, 4) for k, v in part.items() if v is not None and row[k] is not None}
        est[f"{p:.2g}"] = row
    out: dict[str, Any] = {
        "table": "paper Table 2 (ms per reduction)",
        "t": t,
        "g": len(mpl),
        "gmis_per_gpu": counts,
        "B1_GBps": round(bw["B1"] / GB, 3),
        "B2_GBps": round(bw["B2"] / GB, 3),
        "bandwidth_source": bw["source"],
        "mrr_limit": why_not_mrr,
        "estimate_ms": est,
    }
    if net:
        out.update(nodes=nodes, gpus_per_node=g_node, B3_GBps=round(net["B3"] / GB, 3),
                   network_source=net["network_source"])
    return out


def format_cost(cost: dict[str, Any]) -> str:
    """Lines for ``mode=plan``."""
    if not cost["estimate_ms"]:
        return "reduction cost: none (no trainer GMIs in this plan; nothing is reduced)"
    where = f"g={cost['g']} GPUs"
    if "nodes" in cost:
        where += f" on {cost['nodes']} nodes ({cost['gpus_per_node']} per node)"
    lines = [
        f"reduction cost ({cost['table']}): t={cost['t']} GMIs/GPU, {where}, "
        f"B1={cost['B1_GBps']} GB/s, B2={cost['B2_GBps']} GB/s ({cost['bandwidth_source']})"
    ]
    if "nodes" in cost:
        lines.append(f"  B3={cost['B3_GBps']} GB/s between nodes ({cost['network_source']})")
    for size, row in cost["estimate_ms"].items():
        net = row.get("network_ms", {})
        cells = ", ".join(_cell(k, row[k], net.get(k)) for k in STRATEGIES)
        lines.append(f"  {size} params: {cells}; fastest {str(row['fastest']).upper()}")
    if "nodes" in cost:
        lines.append("  MPR n/a across nodes: shared memory does not cross nodes")
    if cost["mrr_limit"]:
        lines.append(f"  MRR n/a: {cost['mrr_limit']}")
    return "\n".join(lines)


def _cell(name: str, ms: float | None, network_ms: float | None) -> str:
    if ms is None:
        return f"{name.upper()} n/a"
    return f"{name.upper()} {ms:.3f} ms" + (f" (network {network_ms:.3f})" if network_ms is not None else "")
