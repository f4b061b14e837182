"""Measure Table 2's bandwidths on this host: ``B1`` (shared memory between GMIs) and ``B2`` (between GPUs).

The cost model (:mod:`gmiexp.costmodel.reductions`) is arithmetic; measuring runs a real 2-member MPR
reduction, so it lives with the reductions. ``reduction.calibrate=true`` asks for it (about a second).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from typing import Any

import torch

from gmiexp.comm.reduction.shm import ShmArena


def _measure_b1(numel: int = 1 << 22, repeats: int = 5) -> float:
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


