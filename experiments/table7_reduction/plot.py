"""Table 7: env steps/s of MPR (baseline) against layout-aware reductions, per task and layout (xGyT)."""

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import plt, results_dir, runs_of, save  # noqa: E402

from gmiexp.rundir import write_csv  # noqa: E402


def main(argv):
    runs = runs_of("table7_reduction", argv)
    table = defaultdict(dict)
    for r in runs:
        c = r.config
        table[(c["task"], f"{c['num_gpus']}G{c['gmis_per_gpu']}T")][c["reduction"]] = r.steps_per_s
    reds = sorted({red for v in table.values() for red in v}, key=lambda x: (x != "mpr", x))
    rows = [{"task": t, "layout": lay, **{red: round(v.get(red, 0.0), 1) for red in reds},
             **{f"{red}/mpr": round(v[red] / v["mpr"], 3) for red in reds if red != "mpr" and v.get("mpr")}}
            for (t, lay), v in sorted(table.items())]
    out = results_dir(__file__)
    write_csv(rows, out / "table7_reduction.csv")
    keys = sorted(table)
    fig, ax = plt.subplots(figsize=(max(5, 1.5 * len(keys) + 2), 4))
    width = 0.8 / len(reds)
    for i, red in enumerate(reds):
        bars = ax.bar([j + i * width for j in range(len(keys))], [table[k].get(red, 0) for k in keys], width,
                      label=f"{red} (baseline)" if red == "mpr" else red)
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    centres = [j + width * (len(reds) - 1) / 2 for j in range(len(keys))]
    ax.set_xticks(centres, [f"{t} {lay}" for t, lay in keys])
    ax.set_ylabel("env steps/s")
    ax.set_title("MPR vs layout-aware reduction (Table 7)")
    ax.legend(fontsize=8)
    save(fig, out / "table7_reduction.png")


if __name__ == "__main__":
    main(sys.argv[1:])
