"""The paper's Table 2: time complexity of MPR, MRR and HAR, with bandwidths measured or assumed.

``t`` is the number of trainer GMIs per GPU (the largest count on uneven
layouts, which bounds the slowest GPU), ``g`` the number of GPUs, ``Mp``
the gradient size in bytes (float32 parameters x 4), ``B1`` the inter-GMI
bandwidth through host shared memory and ``B2`` the inter-GPU (NCCL)
bandwidth, both in bytes/s::

    MPR  2 (g t - 1) Mp / (g t B1)
    MRR  2 (g - 1) (t + 1) Mp / (g B2)            (only while t <= g, even)
    HAR  2 (g - 1) Mp / (g B2) + 2 (t - 1) Mp / (t B1)

Without calibration the defaults are used: ``B1`` = 5 GB/s (one core
copying through host DRAM) and ``B2`` = 100 GB/s on a GPU host (NVLink
class; PCIe hosts are nearer 10) or 1 GB/s on a CPU-only host (gloo over
loopback TCP, which stands in for NCCL there). :func:`calibrate` measures
both in about a second: ``B1`` by timing a 2-member shared-memory
reduction (threads) and inverting the MPR row (``Mp / time`` for g t = 2);
``B2`` by a device-to-device copy between GPUs 0 and 1 when there are two,
else by pushing bytes through a loopback TCP connection (gloo's transport).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from typing import Any

import torch

from gmiexp.comm.reduction.algorithm1 import mrr_limit
from gmiexp.plan import Plan

GB = 1e9
DEFAULT_B1 = 5 * GB
DEFAULT_B2_GPU = 100 * GB
DEFAULT_B2_CPU = 1 * GB
TABLE7_PARAMS = (110_000, 290_000, 1_500_000)  # AT, HM, SH


def complexities(t: int, g: int, mp_bytes: float, b1: float, b2: float) -> dict[str, float]:
    """Seconds per reduction of each strategy by Table 2."""
    mpr = 2 * (g * t - 1) * mp_bytes / (g * t * b1)
    mrr = 2 * (g - 1) * (t + 1) * mp_bytes / (g * b2)
    har = 2 * (g - 1) * mp_bytes / (g * b2) + 2 * (t - 1) * mp_bytes / (t * b1)
    return {"mpr": mpr, "mrr": mrr, "har": har}


def _measure_b1(numel: int = 1 << 22, repeats: int = 5) -> float:
    from gmiexp.comm.reduction.shm import ShmArena

    name = f"gmiexp_cal{os.getpid()}_{uuid.uuid4().hex[:6]}"
    arenas = [ShmArena.create(name, 2, timeout_s=30)]
    arenas.append(ShmArena.attach(name, 2, 1, timeout_s=30))
    xs = [torch.ones(numel), torch.ones(numel)]
    times: list[float] = []

    def member(i: int) -> None:
        arenas[i].join()
        for _ in range(repeats + 1):
            arenas[i].barrier()
            t0 = time.perf_counter()
            arenas[i].allreduce(xs[i])
            if i == 0:
                times.append(time.perf_counter() - t0)

    try:
        ts = [threading.Thread(target=member, args=(i,)) for i in range(2)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
    finally:
        for a in arenas:
            a.close()
    return numel * 4 / min(times[1:])  # MPR row with g t = 2: time = Mp / B1


def _measure_b2(nbytes: int = 64 << 20) -> tuple[float, str]:
    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        src = torch.empty(nbytes // 4, device="cuda:0")
        src.to("cuda:1")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(3):
            src.to("cuda:1")
        torch.cuda.synchronize()
        return 3 * nbytes / (time.perf_counter() - t0), "GPU 0 -> GPU 1 copy"
    a, b = socket.socketpair()
    payload = bytes(1 << 20)
    total = nbytes // 4

    def sink() -> None:
        left = total
        while left > 0:
            left -= len(b.recv(1 << 20))

    th = threading.Thread(target=sink)
    t0 = time.perf_counter()
    th.start()
    sent = 0
    while sent < total:
        a.sendall(payload)
        sent += len(payload)
    th.join()
    dt = time.perf_counter() - t0
    a.close()
    b.close()
    return total / dt, "loopback socket (gloo's transport)"


def calibrate() -> dict[str, Any]:
    """Measure B1 and B2 on this host (about a second)."""
    b1 = _measure_b1()
    b2, how = _measure_b2()
    return {"B1": b1, "B2": b2, "source": f"calibrated: B1 from a 2-member shared-memory reduction, B2 from {how}"}


def defaults(plan: Plan) -> dict[str, Any]:
    gpu = bool(plan.hardware.get("gpus")) if isinstance(plan.hardware, dict) else False
    b2 = DEFAULT_B2_GPU if gpu else DEFAULT_B2_CPU
    where = "GPU host (NVLink class)" if gpu else "CPU host (gloo over loopback)"
    return {"B1": DEFAULT_B1, "B2": b2, "source": f"defaults for a {where}; set reduction.calibrate=true to measure"}


def reduction_cost(
    plan: Plan,
    params: int | None = None,
    calibrate_bandwidth: bool = False,
    bandwidth: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Table 2 for the plan's trainer layout, as a dict for ``plan.notes["reduction_cost"]``.

    ``params``: policy parameters (float32); None gives the paper's Table 7
    sizes. ``bandwidth``: ``{"B1": bytes/s, "B2": bytes/s, "source": str}``
    to reuse a measurement; otherwise measured (``calibrate_bandwidth``) or defaults.
    """
    mpl = plan.gpu_map(plan.trainer_group)
    if not mpl:  # serving layouts: no trainer GMIs, nothing is ever reduced
        return {"table": "paper Table 2 (ms per reduction)", "t": 0, "g": 0, "gmis_per_gpu": [],
                "mrr_limit": "no trainers", "estimate_ms": {}}
    g = len(mpl)
    counts = [len(li) for li in mpl]
    t = max(counts) if counts else 0
    bw = bandwidth or (calibrate() if calibrate_bandwidth else defaults(plan))
    why_not_mrr = mrr_limit(mpl) if mpl else "no trainers"
    sizes = [params] if params else list(TABLE7_PARAMS)
    est: dict[str, dict[str, float | None]] = {}
    for p in sizes:
        c = complexities(t, max(g, 1), 4 * p, bw["B1"], bw["B2"])
        row: dict[str, float | None] = {k: round(v * 1e3, 4) for k, v in c.items()}
        if why_not_mrr:
            row["mrr"] = None
        row["fastest"] = min((k for k in ("mpr", "mrr", "har") if row[k] is not None), key=lambda k: row[k])
        est[f"{p:.2g}"] = row
    return {
        "table": "paper Table 2 (ms per reduction)",
        "t": t,
        "g": g,
        "gmis_per_gpu": counts,
        "B1_GBps": round(bw["B1"] / GB, 3),
        "B2_GBps": round(bw["B2"] / GB, 3),
        "bandwidth_source": bw["source"],
        "mrr_limit": why_not_mrr,
        "estimate_ms": est,
    }


def format_cost(cost: dict[str, Any]) -> str:
    """Lines for ``mode=plan``."""
    if not cost["estimate_ms"]:
        return "reduction cost: none (no trainer GMIs in this plan; nothing is reduced)"
    lines = [
        f"reduction cost ({cost['table']}): t={cost['t']} GMIs/GPU, g={cost['g']} GPUs, "
        f"B1={cost['B1_GBps']} GB/s, B2={cost['B2_GBps']} GB/s ({cost['bandwidth_source']})"
    ]
    for size, row in cost["estimate_ms"].items():
        cells = ", ".join(
            f"{k.upper()} {row[k]:.3f} ms" if row[k] is not None else f"{k.upper()} n/a"
            for k in ("mpr", "mrr", "har")
        )
        lines.append(f"  {size} params: {cells}; fastest {str(row['fastest']).upper()}")
    if cost["mrr_limit"]:
        lines.append(f"  MRR n/a: {cost['mrr_limit']}")
    return "\n".join(lines)
