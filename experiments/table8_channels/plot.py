"""Table 8 / Fig. 11: PPS and TTOP of uni- vs multi-channel experience sharing per task and GPU count."""

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import plt, results_dir, runs_of, save  # noqa: E402

from gmiexp.rundir import write_csv  # noqa: E402

METRICS = {"PPS": "async/predictions_per_s", "TTOP": "async/train_samples_per_s"}


def main(argv):
    runs = runs_of("table8_channels", argv)
    table = defaultdict(dict)
    for r in runs:
        key = (r.config["task"], r.config["num_gpus"])
        for short, metric in METRICS.items():
            channel = r.config.get("channel", "?")
            table[key][f"{channel}_{short}"] = round(float(r.metrics.get(metric) or 0.0), 1)
    if not any(v for row in table.values() for v in row.values()):
        sys.exit("runs have no async/* metrics: the decoupled_async layout and channels are not wired yet")
    rows = [{"task": t, "num_gpus": g, **v} for (t, g), v in sorted(table.items())]
    out = results_dir(__file__)
    write_csv(rows, out / "table8_channels.csv")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    keys = sorted(table)
    for ax, short in zip(axes, METRICS, strict=True):
        for i, ch in enumerate(("uni", "multi")):
            ax.bar([j + 0.4 * i for j in range(len(keys))], [table[k].get(f"{ch}_{short}") or 0 for k in keys],
                   0.4, label=f"{ch}-channel")
        ax.set_xticks([j + 0.2 for j in range(len(keys))], [f"{t}\n{g} GPUs" for t, g in keys])
        ax.set_title(short)
        ax.legend(fontsize=8, loc="lower right")
    save(fig, out / "table8_channels.png")


if __name__ == "__main__":
    main(sys.argv[1:])
