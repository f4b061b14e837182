"""Fig. 9: mean episode reward against training wall time, baseline vs GMI-DRL, one panel per comparison and task.

Each run names its comparison (panel) and side (series) in ``extra.fig9`` (the presets in ``fig9/``); a run
without it is a baseline when it has one GMI per device. Prints, per run, the training time, final reward and the
time to reach a reward threshold (150 on Cartpole, whose episodes cap at 200; elsewhere 90% of the lowest final
reward in the panel), and writes them to ``fig9_reward_summary.csv``.
"""

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import plt, results_dir, runs_of, save  # noqa: E402

from gmiexp.rundir import write_csv  # noqa: E402

THRESHOLDS = {"Cartpole": 150.0}
COLORS = {"baseline": "tab:gray", "gmi_drl": "tab:blue"}
STYLES = ["-", "--", ":", "-."]


def fig9_extra(r):
    """``extra.fig9`` of the run's composed config, or a default from the GMI count."""
    cfg_file = r.path / ".hydra" / "config.yaml"
    extra = {}
    if cfg_file.exists():
        extra = ((yaml.safe_load(cfg_file.read_text()) or {}).get("extra") or {}).get("fig9") or {}
    series = extra.get("series") or ("baseline" if r.config["gmis_per_gpu"] == 1 else "gmi_drl")
    return extra.get("panel", ""), series


def label(r, series):
    c = r.config
    who = "baseline (1 process/dev)" if series == "baseline" else "GMI-DRL"
    return f"{who}: {c['num_gpus']} dev x {c['gmis_per_gpu']} GMI x {c['num_envs']} envs"


def points(r):
    return [(h["wall_s"], h["reward/mean"]) for h in r.summary.get("history", []) if h.get("reward/mean") is not None]


def first_reach(r, threshold):
    """(wall_s, iteration) of the first epoch whose mean episode reward reaches ``threshold``, else (None, None)."""
    hist = [h for h in r.summary.get("history", []) if h.get("reward/mean") is not None]
    return next(((h["wall_s"], h["iteration"]) for h in hist if h["reward/mean"] >= threshold), (None, None))


def median_rate(r):
    """Median of the per-epoch env steps/s (all GMIs): robust to a stalled epoch on a shared host."""
    rates = sorted(h["perf/env_steps_per_s"] for h in r.summary.get("history", []) if h.get("perf/env_steps_per_s"))
    return rates[len(rates) // 2] if rates else 0.0


def main(argv):
    runs = runs_of("fig9_reward", argv)
    meta = {id(r): fig9_extra(r) for r in runs}
    rows = [{"run": label(r, meta[id(r)][1]), "panel": meta[id(r)][0], "iteration": h["iteration"],
             "wall_s": round(h["wall_s"], 3), "frames": h["frames"], "reward_mean": h.get("reward/mean")}
            for r in runs for h in r.summary.get("history", [])]
    out = results_dir(__file__)
    write_csv(rows, out / "fig9_reward.csv")

    panels = list(dict.fromkeys(meta[id(r)][0] for r in runs))  # the sweep's order: the paper's comparison first
    tasks = sorted({r.config["task"] for r in runs})
    fig, axes = plt.subplots(len(panels), len(tasks), figsize=(6 * len(tasks), 4.2 * len(panels)), squeeze=False)
    summary = []
    for i, panel in enumerate(panels):
        for j, task in enumerate(tasks):
            ax = axes[i][j]
            sel = [r for r in runs if r.config["task"] == task and meta[id(r)][0] == panel]
            finals = [points(r)[-1][1] for r in sel if points(r)]
            threshold = THRESHOLDS.get(task, 0.9 * min(finals) if finals else 0.0)
            gpus = sorted({r.config["num_gpus"] for r in sel})
            for r in sel:
                pts = points(r)
                if not pts:
                    continue
                series = meta[id(r)][1]
                ax.plot(*zip(*pts, strict=True), label=label(r, series), lw=1.6, color=COLORS.get(series),
                        ls=STYLES[gpus.index(r.config["num_gpus"]) % len(STYLES)])
                reach, epoch = first_reach(r, threshold)
                summary.append({"task": task, "panel": panel, "run": label(r, series),
                                "env_steps_per_s": round(r.steps_per_s),
                                "median_epoch_env_steps_per_s": round(median_rate(r)), "epochs": len(pts),
                                "train_wall_s": round(pts[-1][0], 2),
                                "job_wall_s": round(float(r.summary.get("wall_s", 0.0)), 2),
                                "final_reward": round(pts[-1][1], 1), "threshold": round(threshold, 1),
                                "time_to_threshold_s": None if reach is None else round(reach, 2),
                                "epoch_at_threshold": epoch})
            ax.axhline(threshold, color="k", lw=0.6, ls=":")
            ax.set_xlabel("training time (s)")
            ax.set_ylabel("mean episode reward")
            ax.set_title(f"{task}: {panel} (Fig. 9)" if panel else f"{task}: reward vs wall time (Fig. 9)",
                         fontsize=10)
            ax.legend(fontsize=8, loc="lower right")
    save(fig, out / "fig9_reward.png")
    if summary:
        write_csv(summary, out / "fig9_reward_summary.csv")
        for s in summary:
            reach = ("never" if s["time_to_threshold_s"] is None
                     else f"{s['time_to_threshold_s']:.1f} s (epoch {s['epoch_at_threshold']})")
            print(f"{s['task']} [{s['panel']}] {s['run']}: {s['epochs']} epochs in {s['train_wall_s']:.1f} s "
                  f"({s['env_steps_per_s']:,} env steps/s, median epoch {s['median_epoch_env_steps_per_s']:,}), "
                  f"final reward {s['final_reward']:.1f}, reward {s['threshold']:g} at {reach}")


if __name__ == "__main__":
    main(sys.argv[1:])
