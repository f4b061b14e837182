"""What a re-shape costs with warm GMI starts against cold ones, interleaved pairs.

    python experiments/elastic/reshape_cost.py                 # Ant, 128 envs in all, 1 -> 2 GMIs, 3 pairs

Each run trains with ``launch.reshape=request``; after ``request_after`` epochs ``gmiexp.tools.reshape`` asks
for ``to`` GMIs per GPU, and the run ends ``max_iterations`` later. Warm runs fork their GMIs from a server that
imported torch, rl-games and the simulator once (``launch.warm_start=true``, the default); cold runs start
each GMI in a fresh interpreter (``launch.warm_start=false``), as gmiexp did before. Each pair runs both, the
order alternating, so a drifting host slows both alike. Reported per run: the launch to the first epoch, and
the re-shape's parts from ``summary.json`` (stop, re-plan, start to the first epoch of the new partition, and
its cost: the gap between the two partitions' epochs beyond one epoch); then the medians and warm / cold.

Writes results/reshape_cost.csv and results/reshape_cost.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import hydra
from omegaconf import DictConfig

from gmiexp.rundir import gmiexp_command, log_tail, results_dir, stop_group, write_csv, write_report

PARTS = ("first_epoch_s", "stop_s", "plan_s", "reshape_first_epoch_s", "cost_s")


def one_run(args: DictConfig, warm: bool) -> dict:
    """One run re-shaped once; its start and the re-shape's parts (seconds)."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"reshape_{'warm' if warm else 'cold'}_")) / "run"
    run_dir.mkdir(parents=True)
    log = run_dir / "console.log"
    overrides = [f"task={args.task}", f"batch.total_envs={args.total_envs}", f"gmis_per_gpu={args.start}",
                 f"max_iterations={args.max_iterations}", "launch.reshape=request", "launch.progress=false",
                 f"launch.warm_start={str(warm).lower()}", *args.overrides]
    t0 = time.time()
    with log.open("w") as out:
        proc = subprocess.Popen(gmiexp_command(overrides, run_dir), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            wait_rows(run_dir, args.request_after, proc, log)
            asked = subprocess.run([sys.executable, "-m", "gmiexp.tools.reshape", str(run_dir),
                                    f"gmis_per_gpu={args.to}"], capture_output=True, text=True, timeout=600)
            if asked.returncode != 0:
                raise SystemExit(f"re-shape refused: {asked.stdout}{asked.stderr}")
            rc = proc.wait(timeout=args.timeout_s)
        except BaseException:
            stop_group(proc)
            raise
    if rc != 0:
        raise SystemExit(f"run failed (exit {rc}): {log}\n{log_tail(log)}")
    s = json.loads((run_dir / "summary.json").read_text())
    (rec,) = [r for r in s["reshapes"] if r.get("status") == "done"]
    first = float(s["history"][0]["wall_s"]) if s["history"] else float("nan")
    return {"warm": warm, "first_epoch_s": round(first + float(s["started_at"]) - t0, 3), "stop_s": rec["stop_s"],
            "plan_s": rec["plan_s"], "reshape_first_epoch_s": rec["first_epoch_s"], "cost_s": rec["cost_s"],
            "epoch_s": rec.get("epoch_s"), "dir": str(run_dir)}


def wait_rows(run_dir: Path, n: int, proc: subprocess.Popen, log: Path, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    hist = run_dir / "gmis" / "0" / "history.jsonl"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"run ended before epoch {n} (exit {proc.returncode}): {log}\n{log_tail(log)}")
        if hist.exists() and len(hist.read_text().splitlines()) >= n:
            return
        time.sleep(0.2)
    raise SystemExit(f"no {n} epochs within {timeout_s:g} s: {log}")


@hydra.main(config_path=".", config_name="reshape_cost", version_base=None)
def main(args: DictConfig) -> None:
    rows = []
    for pair in range(args.pairs):
        for warm in ((True, False) if pair % 2 == 0 else (False, True)):
            r = one_run(args, warm) | {"pair": pair}
            rows.append(r)
            print(f"pair {pair} {'warm' if warm else 'cold'}: " + ", ".join(f"{k} {r[k]}" for k in PARTS)
                  + f" ({r['dir']})", flush=True)
    report(rows, args)


def report(rows: list[dict], args: DictConfig) -> str:
    res = results_dir(args.results_dir, __file__)
    write_csv(rows, res / "reshape_cost.csv")
    lines = [f"task={args.task} batch.total_envs={args.total_envs} gmis_per_gpu {args.start} -> {args.to} after "
             f"{args.request_after} epochs, pairs={args.pairs}", "",
             "| pair | start | launch to first epoch (s) | stop (s) | re-plan (s) | start to first epoch (s) | "
             "re-shape cost (s) |", "|---:|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['pair']} | {'warm' if r['warm'] else 'cold'} | " + " | ".join(f"{r[k]:.2f}" for k in PARTS)
              + " |" for r in rows]
    lines += ["", "| part | warm (median) | cold (median) | warm / cold (median of pairs) |", "|---|---:|---:|---:|"]
    for k in PARTS:
        w = [r[k] for r in rows if r["warm"]]
        c = [r[k] for r in rows if not r["warm"]]
        ratios = [a / b for a, b in zip(w, c, strict=True) if b]
        lines.append(f"| {k} | {median(w):.2f} | {median(c):.2f} | "
                     f"{median(ratios):.3f} ({min(ratios):.3f}..{max(ratios):.3f}) |" if ratios else f"| {k} | | | |")
    return write_report(lines, res / "reshape_cost.md")


if __name__ == "__main__":
    main()
