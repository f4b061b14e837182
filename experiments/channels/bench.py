"""Experience-transfer throughput: multi-channel vs uni-channel vs torch Queue vs Reverb vs raw ring.

One producer process and one consumer process per system, items of 64 KiB and 1 MiB. An item is
one experience batch (obs, actions, rewards, values, dones, neglogp; 256 bytes per row, 64 envs)
produced by one agent; multi-channel packs them into per-field transfers of up to 1 MiB
(Compressor) and the trainer takes 1 MiB batches (Batcher, zero-copy); uni-channel sends every
tensor of every step alone; the baselines move one item per message; the raw ring moves each item
as one opaque buffer with one memcpy and nothing else (the bound). Results go to
``experiments/channels/results/`` as CSV and markdown. Settings: config.yaml here. Run (one benchmark
at a time on shared boxes):

    flock /tmp/gmiexp-bench.lock .venv/bin/python experiments/channels/bench.py
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig

from gmiexp.comm.channels import Batcher, Dispenser, FieldSpec, Migrator, Route, SlotRing, make_channel_set
from gmiexp.rundir import write_csv
from gmiexp.shm.cleanup import cleanup_run

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ENVS = 64
FIELDS = [
    FieldSpec("obs", (52,)),
    FieldSpec("actions", (8,)),
    FieldSpec("rewards"),
    FieldSpec("values"),
    FieldSpec("dones"),
    FieldSpec("neglogp"),
]  # 256 bytes per row
ROW = sum(f.row_bytes for f in FIELDS)
REVERB_VENV = Path(os.environ.get("GMIEXP_CACHE", Path.home() / ".cache" / "gmiexp")) / "reverb-venv"
REVERB_PKGS = ["dm-reverb[tensorflow]==0.14.0", "numpy<2"]
SLOTS = 8
TRANSFER_BYTES = 1 << 20  # Compressor target (multi-channel): one obs transfer of up to 1 MiB
TRAIN_BYTES = 1 << 20  # trainer batch (Batcher): 4096 rows


def experience(nbytes: int, seed: int = 0) -> dict[str, torch.Tensor]:
    steps = nbytes // ROW // ENVS
    g = torch.Generator().manual_seed(seed)
    return {f.name: torch.rand(steps, ENVS, *f.shape, generator=g) for f in FIELDS}


# ---- producers / consumers (spawned) -------------------------------------------------------
def _channel_producer(cs, nbytes: int, n: int) -> None:
    torch.set_num_threads(1)
    # decoupled layout: trainer on another (logical) device, so the Migrator gathers full transfers
    d = Dispenser(cs.fields, Migrator([Route(0, 1, cs)], device=0, gather_batches=max(1, TRANSFER_BYTES // nbytes)))
    exp = experience(nbytes)
    for _ in range(n):
        d.dispense(exp)
    d.close()


class Sink:
    """What every consumer does with what it receives: one copy into a preallocated trainer buffer.

    It stands for the trainer's own read of the batch (PinnedStaging.to_device copies each field
    into a pinned buffer), and it makes every system's consumer touch every byte it is handed, so a
    system whose receiver only maps memory (the rings, torch's fd-passing Queue) gets no free pass.
    """

    def __init__(self, nbytes: int) -> None:
        self.buf = torch.empty(nbytes, dtype=torch.uint8)

    def take(self, t: torch.Tensor, at: int = 0) -> int:
        n = t.numel() * t.element_size()
        self.buf[at : at + n].view(t.dtype).view(t.shape).copy_(t)
        return at + n

    def take_all(self, tensors) -> None:
        at = 0
        for t in tensors:
            at = self.take(t, at)


def _channel_consumer(cs, nbytes: int, n: int, out) -> None:
    torch.set_num_threads(1)
    b = Batcher([cs], batch_size=TRAIN_BYTES // ROW, zero_copy=True)
    sink = Sink(TRAIN_BYTES)
    first = b.next_batch(timeout=120)
    sink.take_all(first.values())
    t0 = time.perf_counter()
    rows = 0
    for batch in b:
        sink.take_all(batch.values())
        rows += batch["obs"].shape[0]
    out.put((1 + rows * ROW // nbytes, time.perf_counter() - t0, first["obs"].shape[0]))


def _ring_producer(ring: SlotRing, nbytes: int, n: int) -> None:
    torch.set_num_threads(1)
    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8)
    for _ in range(n):
        ring.put(src)
    ring.close_writer()


def _ring_consumer(ring: SlotRing, nbytes: int, n: int, out) -> None:
    torch.set_num_threads(1)
    sink = Sink(nbytes)
    sink.take(ring.recv(timeout=120).data)
    ring.release()
    t0 = time.perf_counter()
    for _ in range(n - 1):
        sink.take(ring.recv(timeout=120).data)
        ring.release()
    out.put((n, time.perf_counter() - t0, nbytes))


def _queue_producer(q, nbytes: int, n: int, one_tensor: bool, done) -> None:
    torch.set_num_threads(1)
    exp = experience(nbytes)
    flat = torch.cat([v.reshape(-1) for v in exp.values()])
    for _ in range(n):  # a fresh batch per item, as an agent produces one per rollout
        q.put(flat.clone() if one_tensor else {k: v.clone() for k, v in exp.items()})
    q.put(None)
    done.wait(600)  # torch shares storages by fd: the sender must outlive the receiver's get()


def _queue_consumer(q, done, nbytes: int, n: int, out) -> None:
    torch.set_num_threads(1)
    sink = Sink(nbytes)

    def take(x) -> None:
        sink.take_all(x.values()) if isinstance(x, dict) else sink.take(x)

    take(q.get(timeout=120))
    t0 = time.perf_counter()
    got = 1
    while (x := q.get(timeout=120)) is not None:
        take(x)
        got += 1
    out.put((got, time.perf_counter() - t0, nbytes))
    done.set()


# ---- runners --------------------------------------------------------------------------------
def _run_pair(ctx, producer, pargs, consumer, cargs) -> tuple[int, float]:
    out = ctx.Queue()
    cons = ctx.Process(target=consumer, args=(*cargs, out))
    prod = ctx.Process(target=producer, args=pargs)
    cons.start()
    prod.start()
    got, secs, _ = out.get(timeout=600)
    prod.join(60)
    cons.join(60)
    return got - 1, secs  # the first item (start-up) is not timed


def bench_channels(ctx, mode: str, nbytes: int, n: int, tag: str) -> tuple[int, float]:
    cs = make_channel_set(
        mode,
        FIELDS,
        rows_per_step=ENVS,
        target_bytes=TRANSFER_BYTES,
        n_slots=SLOTS,
        name=f"bench-{mode}",
        tag=tag,
        batch_rows=TRAIN_BYTES // ROW,
    )
    try:
        return _run_pair(ctx, _channel_producer, (cs, nbytes, n), _channel_consumer, (cs, nbytes, n))
    finally:
        cs.close()


def bench_ring(ctx, nbytes: int, n: int, tag: str) -> tuple[int, float]:
    ring = SlotRing.create("bench-raw", SLOTS, nbytes, tag=tag)
    try:
        return _run_pair(ctx, _ring_producer, (ring, nbytes, n), _ring_consumer, (ring, nbytes, n))
    finally:
        ring.close()


def bench_queue(nbytes: int, n: int, one_tensor: bool) -> tuple[int, float]:
    import torch.multiprocessing as tmp

    ctx = tmp.get_context("spawn")
    q, done = ctx.Queue(maxsize=SLOTS), ctx.Event()
    return _run_pair(ctx, _queue_producer, (q, nbytes, n, one_tensor, done), _queue_consumer, (q, done, nbytes, n))


# ---- Reverb (own venv: TF 2.15, numpy < 2) --------------------------------------------------
def ensure_reverb_venv() -> tuple[Path | None, str]:
    py = REVERB_VENV / "bin" / "python"
    if py.exists() and subprocess.run([py, "-c", "import reverb"], capture_output=True).returncode == 0:
        return py, "ok"
    if sys.version_info >= (3, 12):
        return None, f"dm-reverb 0.14.0 has no wheel for Python {platform.python_version()} (needs <= 3.11)"
    steps = [[sys.executable, "-m", "venv", str(REVERB_VENV)], [py, "-m", "pip", "install", "-q", *REVERB_PKGS]]
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"{' '.join(map(str, cmd[:4]))} failed: {(r.stderr or r.stdout).strip()[-300:]}"
    r = subprocess.run([py, "-c", "import reverb"], capture_output=True, text=True)
    return (py, "ok") if r.returncode == 0 else (None, f"import reverb failed: {r.stderr.strip()[-300:]}")


def bench_reverb(py: Path, nbytes: int, n: int) -> tuple[int, float] | str:
    r = subprocess.run(
        [py, str(HERE / "reverb_worker.py"), str(nbytes), str(n), str(ENVS)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return f"reverb run failed: {(r.stderr or r.stdout).strip()[-300:]}"
    res = json.loads(lines[-1])
    return res["items"], res["seconds"]


# ---- report ---------------------------------------------------------------------------------
@hydra.main(config_path=".", config_name="config", version_base=None)
def main(args: DictConfig) -> None:
    torch.set_num_threads(1)
    ctx = mp.get_context("spawn")
    tag = f"bench{os.getpid()}-{uuid.uuid4().hex[:4]}"
    reverb_py, reverb_note = (None, "skipped (reverb=false)") if not args.reverb else ensure_reverb_venv()
    rows, notes = [], {"reverb": reverb_note}
    try:
        for nbytes, n, n_uni in (
            (64 << 10, args.items_64k, args.uni_items_64k),
            (1 << 20, args.items_1m, args.uni_items_1m),
        ):
            runs = {
                "multi-channel": lambda nb=nbytes, k=n: bench_channels(ctx, "multi", nb, k, tag),
                "uni-channel": lambda nb=nbytes, k=n_uni: bench_channels(ctx, "uni", nb, k, tag),
                "torch.mp.Queue (dict of fields)": lambda nb=nbytes, k=n: bench_queue(nb, k, False),
                "torch.mp.Queue (one tensor)": lambda nb=nbytes, k=n: bench_queue(nb, k, True),
                "raw shm slot ring (bound)": lambda nb=nbytes, k=n: bench_ring(ctx, nb, k, tag),
            }
            if reverb_py is not None:
                runs["reverb 0.14 (queue table)"] = lambda nb=nbytes, k=n: bench_reverb(reverb_py, nb, max(k // 4, 50))
            for system, fn in runs.items():
                res = fn()
                if isinstance(res, str):
                    notes[f"{system} @ {nbytes}"] = res
                    print(f"{system:34s} {nbytes >> 10:5d} KiB  FAILED: {res}", flush=True)
                    continue
                items, secs = res
                row = {
                    "system": system,
                    "item_kib": nbytes >> 10,
                    "items": items,
                    "seconds": round(secs, 4),
                    "items_per_s": round(items / secs, 1),
                    "mb_per_s": round(items * nbytes / secs / 1e6, 1),
                }
                rows.append(row)
                print(
                    f"{system:34s} {row['item_kib']:5d} KiB  {row['items_per_s']:10.1f} items/s "
                    f"{row['mb_per_s']:9.1f} MB/s",
                    flush=True,
                )
    finally:
        cleanup_run(tag)
    write(rows, notes)


def ratios(rows: list[dict]) -> list[str]:
    out = []
    for kib in sorted({r["item_kib"] for r in rows}):
        by = {r["system"]: r["mb_per_s"] for r in rows if r["item_kib"] == kib}
        m = by.get("multi-channel")
        if not m:
            continue
        for other, target in (
            ("torch.mp.Queue (dict of fields)", "8x"),
            ("torch.mp.Queue (one tensor)", "8x"),
            ("reverb 0.14 (queue table)", "15x"),
            ("uni-channel", "-"),
        ):
            if by.get(other):
                out.append(f"{kib} KiB: multi-channel / {other} = {m / by[other]:.1f}x (target {target})")
        if by.get("raw shm slot ring (bound)"):
            out.append(
                f"{kib} KiB: multi-channel / raw ring = {100 * m / by['raw shm slot ring (bound)']:.0f}% "
                "(target >= 60%)"
            )
    return out


def write(rows: list[dict], notes: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    write_csv(rows, RESULTS / f"bench-{stamp}.csv", None if rows else ["system"])
    md = [
        f"# channel benchmark {stamp} ({platform.node()}, {os.cpu_count()} cores, torch {torch.__version__})",
        "",
        "| system | item | items/s | MB/s |",
        "| --- | --- | ---: | ---: |",
    ]
    md += [f"| {r['system']} | {r['item_kib']} KiB | {r['items_per_s']:.0f} | {r['mb_per_s']:.0f} |" for r in rows]
    md += ["", *[f"- {x}" for x in ratios(rows)], "", *[f"- note {k}: {v}" for k, v in notes.items()]]
    text = "\n".join(md) + "\n"
    (RESULTS / f"bench-{stamp}.md").write_text(text)
    (RESULTS / "latest.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
