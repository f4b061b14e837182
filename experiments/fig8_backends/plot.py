"""Fig. 8: env steps/s per backend, normalised to direct sharing, per task and GMIs per GPU (GPU runs)."""

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import plt, results_dir, runs_of, save  # noqa: E402

from gmiexp.rundir import write_csv  # noqa: E402

BACKENDS = ("direct", "mps", "mig")


def main(argv):
    runs = runs_of("fig8_backends", argv)
    raw = defaultdict(dict)
    for r in runs:
        raw[(r.config["task"], r.config["gmis_per_gpu"])][r.config["backend"]] = r.steps_per_s
    rows = [{"task": t, "gmis_per_gpu": g, "backend": b, "env_steps_per_s": round(v.get(b, 0.0), 1),
             "normalised": round(v.get(b, 0.0) / v["direct"], 3) if v.get("direct") else None}
            for (t, g), v in sorted(raw.items()) for b in BACKENDS]
    out = results_dir(__file__)
    write_csv(rows, out / "fig8_backends.csv")
    groups = sorted(raw)
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(groups) + 2), 4))
    for i, b in enumerate(BACKENDS):
        vals = [raw[k].get(b, 0.0) / raw[k]["direct"] if raw[k].get("direct") else 0.0 for k in groups]
        ax.bar([j + 0.27 * i for j in range(len(groups))], vals, 0.27, label=b)
    ax.set_xticks([j + 0.27 for j in range(len(groups))], [f"{t}\n{g}-serving" for t, g in groups])
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_ylabel("throughput / direct sharing")
    ax.set_title("GMI backends (Fig. 8)")
    ax.legend()
    save(fig, out / "fig8_backends.png")


if __name__ == "__main__":
    main(sys.argv[1:])
