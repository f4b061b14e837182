"""Fig. 10: steady-state env steps/s (bars) and peak memory (line) against num_envs, one GMI."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import plt, results_dir, runs_of, save  # noqa: E402

from gmiexp.rundir import write_csv  # noqa: E402
from gmiexp.search.profiler import steady_throughput  # noqa: E402

WARMUP = 2


def main(argv):
    runs = sorted(runs_of("fig10_num_envs", argv), key=lambda r: (r.config["task"], r.config["num_envs"]))
    gpu = any(k.startswith("gpu/") for r in runs for k in r.metrics)
    rows = [{"task": r.config["task"], "num_envs": r.config["num_envs"],
             "env_steps_per_s": round(steady_throughput(r.summary, WARMUP), 1),
             "mem_mb": round(r.peak_mem_mb, 1), "mem_kind": "gpu" if gpu else "process_rss"} for r in runs]
    out = results_dir(__file__)
    write_csv(rows, out / "fig10_num_envs.csv")
    tasks = sorted({row["task"] for row in rows})
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        sel = [row for row in rows if row["task"] == task]
        xs = range(len(sel))
        ax.bar(xs, [row["env_steps_per_s"] for row in sel], color="tab:blue", label="env steps/s")
        ax.set_xticks(xs, [row["num_envs"] for row in sel])
        ax.set_xlabel("num_envs")
        ax.set_ylabel("env steps/s (steady state)", color="tab:blue")
        mem = ax.twinx()
        mem.plot(xs, [row["mem_mb"] for row in sel], "o-", color="tab:red")
        mem.set_ylabel(("GPU memory" if gpu else "process RSS") + " (MB)", color="tab:red")
        ax.set_title(f"{task}: throughput and memory vs num_envs (Fig. 10)")
    save(fig, out / "fig10_num_envs.png")


if __name__ == "__main__":
    main(sys.argv[1:])
