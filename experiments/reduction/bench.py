"""Latency of one gradient reduction per strategy, layout and model size, against a memcpy bound.

Run: ``python experiments/reduction/bench.py [quick=true]`` (settings: config.yaml here; see docs/experiments.md).
Writes ``results/bench.csv`` and ``results/bench.md`` and prints the table.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import hydra
import numpy as np
from omegaconf import DictConfig

HERE = Path(__file__).resolve().parent
SIZES = (110_000, 290_000, 1_500_000)  # Table 7 model sizes (AT, HM, SH)
LAYOUTS = ("1G2T", "1G4T", "2G2T", "2G3T", "4G4T")
STRATEGIES = ("mpr", "allreduce", "mrr", "har")
COLUMNS = ("mpr", "mpr-buf", "allreduce", "mrr", "har")


def parse_layout(s: str) -> tuple[int, int]:
    g, t = s.upper().rstrip("T").split("G")
    return int(g), int(t)


def make_plan(g: int, t: int):
    from gmiexp.plan import GMI, Plan

    gmis = [GMI(id=d * t + i, device=d, local_index=i, roles=["trainer"]) for d in range(g) for i in range(t)]
    return Plan(gmis=gmis, layout="tcg_ex", backend="direct", reduction="", trainer_group=[x.id for x in gmis])


def worker(rank: int, g: int, t: int, port: int, sizes: list[int], iters: int, warmup: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    from gmiexp.comm.manager import GMIManager
    from gmiexp.comm.reduction import build, serving

    torch.set_num_threads(1)
    world = g * t
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    plan = make_plan(g, t)
    mgr = GMIManager(plan, rank)
    ok = serving(plan)
    reds = {s: build(s, mgr, plan.trainer_group) for s in STRATEGIES if s in ok}
    rows = []
    gen = torch.Generator().manual_seed(rank)
    for n in sizes:
        x = torch.randn(n, generator=gen)
        runs = [(name, red, x) for name, red in reds.items()]
        if "mpr" in reds:  # gradients flattened straight into the shared slot: no copy in
            buf = reds["mpr"].buffer(n)
            buf.copy_(x)
            runs.insert(1, ("mpr-buf", reds["mpr"], buf))
        for name, red, flat in runs:
            times = []
            for k in range(warmup + iters):
                dist.barrier()
                t0 = time.perf_counter()
                red.allreduce_(flat)
                dt = time.perf_counter() - t0
                if k >= warmup:
                    times.append(dt)
            everyone = [None] * world
            dist.all_gather_object(everyone, times)
            if rank == 0:
                slowest = [max(col) for col in zip(*everyone, strict=True)]  # ends when the last member has it
                rows.append({"strategy": name, "params": n, "times": slowest})
    for red in reds.values():
        red.close()
    dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps(rows))


def memcpy_bound(world: int, n: int, cores: int, repeats: int = 5) -> float:
    """Seconds for one core to memcpy 2 x world x n float32 in buffers too big for cache, / cores."""
    total = 2 * world * n * 4
    pool = 64 << 20
    src = np.ones(pool // 4, np.float32)
    dst = np.zeros_like(src)
    step = max(1, n)
    best = []
    for _ in range(repeats):
        left, off = total // 4, 0
        t0 = time.perf_counter()
        while left > 0:
            m = min(step, left, src.size - off)
            np.copyto(dst[off:off + m], src[off:off + m])
            left -= m
            off = (off + m) % src.size
        best.append(time.perf_counter() - t0)
    return statistics.median(best) / cores


def p95(xs: list[float]) -> float:
    return float(np.percentile(xs, 95))


@hydra.main(config_path=".", config_name="config", version_base=None)
def main(args: DictConfig) -> None:
    layouts = list(args.layouts or (["1G4T", "2G2T"] if args.quick else list(LAYOUTS)))
    sizes = [int(n) for n in args.sizes or SIZES]
    iters = args.iters or (10 if args.quick else 40)
    warmup = 3
    cores = len(os.sched_getaffinity(0))
    out = Path(args.out or HERE / "results")
    out.mkdir(parents=True, exist_ok=True)

    import torch.multiprocessing as mp

    from gmiexp.launch.launcher import free_port  # here, not at the top: the spawned workers need none of it
    from gmiexp.rundir import write_csv

    records = []
    for lay in layouts:
        g, t = parse_layout(lay)
        world = g * t
        bounds = {n: memcpy_bound(world, n, cores) for n in sizes}
        with tempfile.TemporaryDirectory() as tmp:
            res = Path(tmp) / "rows.json"
            os.environ["GMIEXP_RUN_TAG"] = f"bench{os.getpid()}{lay}"
            mp.spawn(worker, args=(g, t, free_port(), sizes, iters, warmup, str(res)), nprocs=world, join=True)
            rows = json.loads(res.read_text())
        for r in rows:
            ts = r["times"]
            records.append({
                "layout": lay, "gmis": world, "params": r["params"], "strategy": r["strategy"],
                "mean_ms": 1e3 * statistics.fmean(ts), "median_ms": 1e3 * statistics.median(ts),
                "p95_ms": 1e3 * p95(ts), "bound_ms": 1e3 * bounds[r["params"]], "iters": len(ts),
            })
        print(f"{lay}: done", file=sys.stderr, flush=True)

    write_csv(records, out / "bench.csv")
    table = render(records, cores)
    (out / "bench.md").write_text(table)
    print(table)


def render(records: list[dict], cores: int) -> str:
    by = {(r["layout"], r["params"], r["strategy"]): r for r in records}
    keys = sorted({(r["layout"], r["params"]) for r in records}, key=lambda k: (LAYOUTS.index(k[0])
                  if k[0] in LAYOUTS else 99, k[1]))
    head = ["layout", "params"] + [f"{s} mean/p95 ms" for s in COLUMNS] + [
        "bound ms", "gloo/MPR", "gloo/MPR-buf", "MPR/bound", "MPR-buf/bound"]
    lines = [f"memcpy bound: 2 x GMIs x gradient bytes, one core, / {cores} cores; "
             "latency = slowest member per call", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lay, n in keys:
        cells = [lay, f"{n:.2g}"]
        for s in COLUMNS:
            r = by.get((lay, n, s))
            cells.append(f"{r['mean_ms']:.2f} / {r['p95_ms']:.2f}" if r else "n/a")
        bound = next(by[(lay, n, s)]["bound_ms"] for s in COLUMNS if (lay, n, s) in by)
        mpr, buf, glo = (by.get((lay, n, s)) for s in ("mpr", "mpr-buf", "allreduce"))
        cells.append(f"{bound:.2f}")
        for m in (mpr, buf):
            cells.append(f"{glo['mean_ms'] / m['mean_ms']:.1f}x" if m and glo else "n/a")
        for m in (mpr, buf):
            cells.append(f"{m['mean_ms'] / bound:.2f}x" if m else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
