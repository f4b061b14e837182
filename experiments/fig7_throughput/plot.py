"""Fig. 7(b): sync-training env steps/s per device count and GMIs per device, normalised to 1 x 1."""

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import plt, results_dir, runs_of, save  # noqa: E402

from gmiexp.rundir import write_csv  # noqa: E402

KIND = {"tcg": "serving", "tcg_ex": "sync training"}


def main(argv):
    runs = runs_of("fig7_throughput", argv)
    base = {}
    for r in runs:
        if r.config["num_gpus"] == 1 and r.config["gmis_per_gpu"] == 1:
            base[(r.config["task"], r.config["layout"])] = r.steps_per_s
    rows = [{"task": r.config["task"], "layout": r.config["layout"], "num_gpus": r.config["num_gpus"],
             "gmis_per_gpu": r.config["gmis_per_gpu"], "num_envs": r.config["num_envs"],
             "env_steps_per_s": round(r.steps_per_s, 1),
             "normalised": round(r.steps_per_s / base[(r.config["task"], r.config["layout"])], 3)} for r in runs]
    out = results_dir(__file__)
    write_csv(rows, out / "fig7_throughput.csv")
    by = defaultdict(dict)
    for row in rows:
        key = (row["task"], KIND.get(row["layout"], row["layout"]), row["num_gpus"])
        by[key][row["gmis_per_gpu"]] = row["normalised"]
    ks = sorted({row["gmis_per_gpu"] for row in rows})
    fig, ax = plt.subplots(figsize=(max(5, 1.8 * len(by) + 2), 4))
    width = 0.8 / len(ks)
    for i, k in enumerate(ks):
        xs = [j + i * width for j in range(len(by))]
        label = "1 process / device (baseline)" if k == 1 else f"GMI-DRL: {k} GMIs / device"
        bars = ax.bar(xs, [v.get(k, 0) for v in by.values()], width, label=label)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks([j + width * (len(ks) - 1) / 2 for j in range(len(by))],
                  [f"{t} {kind}\n{g} device(s)" for t, kind, g in by])
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_ylabel("throughput / (1 device, 1 process)")
    ax.set_title("Serving and sync. training throughput (Fig. 7)")
    ax.set_ylim(0, max(row["normalised"] for row in rows) * 1.35)
    ax.legend(fontsize=8, loc="upper left")
    save(fig, out / "fig7_throughput.png")


if __name__ == "__main__":
    main(sys.argv[1:])
