"""Plot results/vectorization_fusion.csv: steps/s against the number of environments, log-log."""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"gym_loop": "o-", "envpool": "s-", "torch_env": "^-", "torch_eager": "v-", "torch_compile_k1": "d-"}


def plot(results: Path) -> Path:
    series = defaultdict(list)
    for row in csv.DictReader((results / "vectorization_fusion.csv").open()):
        series[row["method"]].append((int(row["num_envs"]), float(row["steps_per_s"])))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in series.items():
        ax.plot(*zip(*sorted(pts), strict=True), STYLE.get(name, "*-"), label=name, ms=4)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("parallel environments N")
    ax.set_ylabel("env steps / s")
    ax.set_title("Cart-pole: vectorisation and K-step fusion (seed 002)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = results / "vectorization_fusion.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    print(plot(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results"))
