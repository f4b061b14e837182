"""Multi-node overhead: 2 loopback nodes x 2 GMIs against 1 node x 4 GMIs, same task, total envs and reduction.

    python experiments/multinode/bench.py task=Ant total_envs=128 iterations=20 pairs=4

Both "nodes" run on this host (two gmiexp launchers meeting at a c10d rendezvous on 127.0.0.1), so
on a few cores this measures what running across nodes costs (the rendezvous, the second elastic
agent, the cross-node heartbeats, the reduction's extra hop), not a speed-up. Runs are interleaved
in pairs whose order alternates (A-B, B-A, ...), so a drifting host slows both sides of a pair alike;
the report gives every pair's ratio, the medians and the spread of the ratios (the host's noise).

Writes results/bench.csv and results/bench.md (settings: bench.yaml here). Every run writes its
summary.json (node 0's for the 2-node runs) into a run directory of its own, which is what is read.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from statistics import median

import hydra
from omegaconf import DictConfig

from gmiexp.launch.launcher import free_port
from gmiexp.rundir import (
    RunFailed,
    gmiexp_command,
    read_summary,
    results_dir,
    run_gmiexp,
    run_logged,
    write_csv,
    write_report,
)

ONE, TWO = "1 node x 4 GMIs", "2 nodes x 2 GMIs"
KEYS = ("perf/env_steps_per_s", "time/comm_s", "time/sim_s", "time/train_s")


def common(args: DictConfig) -> list[str]:
    return [f"task={args.task}", f"max_iterations={args.iterations}", f"num_envs={args.total_envs // 4}",
            f"reduction={args.reduction}", "hardware=cpu", "launch.progress=false", "num_gpus=1"]


def one_node(args: DictConfig) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="multinode_1x4_"))
    return run_gmiexp([*common(args), "gmis_per_gpu=4"], run_dir, timeout_s=args.timeout_s)


def two_nodes(args: DictConfig) -> dict:
    """Both node launchers in one run directory (as Slurm tasks of one job): node 0 writes summary.json."""
    run_dir = Path(tempfile.mkdtemp(prefix="multinode_2x2_"))
    port = int(args.port) or free_port()
    codes: dict[int, int | None] = {}

    def node(rank: int) -> None:
        cmd = gmiexp_command([*common(args), "gmis_per_gpu=2", "launch.nnodes=2", f"launch.node_rank={rank}",
                              f"launch.rdzv_endpoint=127.0.0.1:{port}"], run_dir)
        codes[rank] = run_logged(cmd, run_dir / f"console_node{rank}.log", args.timeout_s)

    threads = [threading.Thread(target=node, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for rank, rc in sorted(codes.items()):
        if rc != 0:
            log = run_dir / f"console_node{rank}.log"
            raise RunFailed(f"node {rank}: " + ("timeout" if rc is None else f"exit code {rc}"), run_dir, log, rc)
    return read_summary(run_dir, run_dir / "console_node0.log")


def flat(s: dict) -> dict:
    m = s["metrics"]
    return {k: m.get(k) for k in KEYS} | {"wall_s": s["wall_s"]}


@hydra.main(config_path=".", config_name="bench", version_base=None)
def main(args: DictConfig) -> None:
    if args.total_envs % 4:
        raise SystemExit(f"total_envs={args.total_envs} must split evenly over 4 GMIs")
    rows = []
    for pair in range(args.pairs):
        order = [(ONE, one_node), (TWO, two_nodes)] if pair % 2 == 0 else [(TWO, two_nodes), (ONE, one_node)]
        for name, fn in order:
            try:
                s = fn(args)
            except RunFailed as e:
                raise SystemExit(f"failed: {name}\n{e}") from e
            rows.append({"run": name, "pair": pair, **flat(s)})
            print(f"pair {pair} {name}: {s['metrics']['perf/env_steps_per_s']:,.0f} env steps/s, "
                  f"comm {s['metrics'].get('time/comm_s', 0):.2f} s, wall {s['wall_s']:.1f} s", flush=True)
    report(rows, args)


def report(rows: list[dict], args: DictConfig) -> str:
    res = results_dir(args.results_dir, __file__)
    write_csv(rows, res / "bench.csv")
    get = lambda name, key: [r[key] for r in rows if r["run"] == name]  # noqa: E731  (pair order)
    ratios = [b / a for a, b in zip(get(ONE, "perf/env_steps_per_s"), get(TWO, "perf/env_steps_per_s"), strict=True)]
    lines = [f"task={args.task} total_envs={args.total_envs} iterations={args.iterations} pairs={args.pairs} "
             f"reduction={args.reduction}; both nodes on this host (loopback): an overhead measurement", "",
             f"| pair | {ONE} env steps/s | {TWO} env steps/s | ratio 2x2/1x4 | comm s 1x4 | comm s 2x2 |",
             "|---:|---:|---:|---:|---:|---:|"]
    for i, ratio in enumerate(ratios):
        a, b = (next(r for r in rows if r["run"] == n and r["pair"] == i) for n in (ONE, TWO))
        lines.append(f"| {i} | {a['perf/env_steps_per_s']:,.0f} | {b['perf/env_steps_per_s']:,.0f} | {ratio:.3f} | "
                     f"{a['time/comm_s'] or 0:.2f} | {b['time/comm_s'] or 0:.2f} |")
    med = {n: median(get(n, "perf/env_steps_per_s")) for n in (ONE, TWO)}
    comm = {n: median(v or 0.0 for v in get(n, "time/comm_s")) for n in (ONE, TWO)}
    wall = {n: median(get(n, "wall_s")) for n in (ONE, TWO)}
    lines += ["", "| run | median env steps/s | median time/comm_s | median wall s |", "|---|---:|---:|---:|"]
    lines += [f"| {n} | {med[n]:,.0f} | {comm[n]:.2f} | {wall[n]:.1f} |" for n in (ONE, TWO)]
    overhead = round(100 * (1 - median(ratios)), 1) + 0.0  # + 0.0: no "-0.0"
    lines += ["", f"median per-pair ratio (2 nodes / 1 node): {median(ratios):.3f}; pair ratios range "
              f"{min(ratios):.3f}..{max(ratios):.3f} (the host's noise); overhead {overhead:.1f}% of env steps/s; "
              f"time/comm_s {comm[TWO] - comm[ONE]:+.2f} s and wall {wall[TWO] - wall[ONE]:+.1f} s per run (medians)"]
    return write_report(lines, res / "bench.md")


if __name__ == "__main__":
    main()
