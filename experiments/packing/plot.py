"""Packing (seed 003): makespan of k jobs packed on one device vs run one after another."""

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import plt, results_dir, save  # noqa: E402


def main(argv):
    out = Path(argv[0]) if argv else results_dir(__file__)
    rows = list(csv.DictReader((out / "packing.csv").open()))
    ks = [r["k"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 4))
    xs = range(len(rows))
    col = {k: [float(r[k]) for r in rows] for k in rows[0] if k != "k"}
    a.bar([x - 0.2 for x in xs], col["makespan_sequential_s"], 0.4, label="one after another")
    bars = a.bar([x + 0.2 for x in xs], col["makespan_packed_s"], 0.4, label="packed (concurrent)")
    a.bar_label(bars, labels=[f"{float(r['speedup']):.2f}x" for r in rows], fontsize=8)
    a.set_xticks(list(xs), [f"k={k}" for k in ks])
    a.set_ylabel("makespan (s)")
    a.set_title("k independent training jobs")
    a.legend(fontsize=8)
    b.bar([x - 0.2 for x in xs], col["env_steps_per_s_sequential"], 0.4, label="sequential")
    b.bar([x + 0.2 for x in xs], col["env_steps_per_s_packed"], 0.4, label="packed")
    b.set_xticks(list(xs), [f"k={k}" for k in ks])
    b.set_ylabel("aggregate env steps/s (incl. start-up)")
    b.set_title("Aggregate throughput")
    b.legend(fontsize=8)
    save(fig, out / "packing.png")


if __name__ == "__main__":
    main(sys.argv[1:])
