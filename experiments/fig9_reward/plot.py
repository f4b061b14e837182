"""Fig. 9: mean episode reward against wall time for each run of the sweep."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import plt, results_dir, runs_of, save, write_csv  # noqa: E402


def label(r):
    k = r.config["gmis_per_gpu"]
    who = "1 process (baseline)" if k == 1 else f"GMI-DRL {k} GMIs"
    return f"{r.config['task']} {r.config['num_gpus']} dev, {who}"


def main(argv):
    runs = runs_of("fig9_reward", argv)
    rows = [{"run": label(r), "iteration": h["iteration"], "wall_s": round(h["wall_s"], 3),
             "frames": h["frames"], "reward_mean": h.get("reward/mean")}
            for r in runs for h in r.summary.get("history", [])]
    out = results_dir(__file__)
    write_csv(rows, out / "fig9_reward.csv")
    tasks = sorted({r.config["task"] for r in runs})
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for r in (r for r in runs if r.config["task"] == task):
            hist = r.summary["history"]
            pts = [(h["wall_s"], h["reward/mean"]) for h in hist if h.get("reward/mean") is not None]
            ax.plot(*zip(*pts, strict=True), label=label(r), lw=1.4)
        ax.set_xlabel("training time (s)")
        ax.set_ylabel("mean episode reward")
        ax.set_title(f"{task}: reward vs wall time (Fig. 9)")
        ax.legend(fontsize=8)
    save(fig, out / "fig9_reward.png")


if __name__ == "__main__":
    main(sys.argv[1:])
