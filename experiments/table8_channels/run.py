"""Table 8 on this machine: decoupled async training with uni- vs multi-channel experience sharing.

Runs ``python -m gmiexp layout=decoupled_async channel=<uni|multi>`` alternately (``repeats`` times
each, every run under ``flock /tmp/gmiexp-bench.lock`` because the box is shared), reads each
run's summary.json (``gmiexp.rundir``) and prints PPS (``async/predictions_per_s``) and TTOP
(``async/train_samples_per_s``) per run, the medians, and the multi/uni ratios; writes
``results/async_uni_vs_multi.csv``. The paper's TTOP ratios are 1.13-1.32x. Settings: run.yaml here.

    .venv/bin/python experiments/table8_channels/run.py repeats=3
"""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

import hydra
from omegaconf import DictConfig

from gmiexp.rundir import gmiexp_command, run_gmiexp, write_csv

HERE = Path(__file__).resolve().parent
LOCK = "/tmp/gmiexp-bench.lock"


def one_run(channel: str, rep: int, args: DictConfig, out: Path) -> dict:
    run_dir = out / "runs" / f"{channel}_{rep}"
    shutil.rmtree(run_dir, ignore_errors=True)  # a reused run dir would append to the old histories
    overrides = ["layout=decoupled_async", f"task={args.task}", f"channel={channel}", f"num_gpus={args.num_gpus}",
                 f"gmis_per_gpu={args.gmis_per_gpu}", f"num_envs={args.num_envs}",
                 f"max_iterations={args.iterations}", f"train.horizon_length={args.horizon}",
                 f"async_train.max_policy_lag={args.max_policy_lag}", f"async_train.algo={args.algo}",
                 f"backend.pin_devices={str(args.pin_devices).lower()}", "launch.progress=false", *args.overrides]
    s = run_gmiexp(overrides, run_dir, prefix=["flock", LOCK])
    trainers = [g for g in s["gmis"].values() if "train_samples" in g]
    return {
        "channel": channel, "repeat": rep, "pps": s["metrics"]["async/predictions_per_s"],
        "ttop": s["metrics"]["async/train_samples_per_s"], "wall_s": s["wall_s"],
        "train_samples": sum(t["train_samples"] for t in trainers),
        "stale_rows": sum(t["stale_rows"] for t in trainers),
        "seq_errors": sum(t["seq_errors"] for t in trainers),
        "mean_lag": statistics.mean(t["async/mean_lag"] for t in trainers),
        "command": " ".join(gmiexp_command(overrides, run_dir)),
    }


@hydra.main(config_path=".", config_name="run", version_base=None)
def main(args: DictConfig) -> None:
    out = Path(args.out or HERE / "results")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for rep in range(args.repeats):
        for channel in ("uni", "multi"):
            r = one_run(channel, rep, args, out)
            rows.append(r)
            print(f"{channel:5s} rep {rep}: PPS {r['pps']:>10,.0f}  TTOP {r['ttop']:>10,.0f}  "
                  f"wall {r['wall_s']:.1f}s  stale {r['stale_rows']}  seq_errors {r['seq_errors']}", flush=True)
    med = {ch: {k: statistics.median(r[k] for r in rows if r["channel"] == ch) for k in ("pps", "ttop")}
           for ch in ("uni", "multi")}
    print("\n| channel | PPS (median) | TTOP (median) |\n| --- | ---: | ---: |")
    for ch in ("uni", "multi"):
        print(f"| {ch} | {med[ch]['pps']:,.0f} | {med[ch]['ttop']:,.0f} |")
    ratio_t = med["multi"]["ttop"] / med["uni"]["ttop"]
    ratio_p = med["multi"]["pps"] / med["uni"]["pps"]
    print(f"\nmulti/uni: TTOP {ratio_t:.2f}x (paper 1.13-1.32x, target >= 1.3x), PPS {ratio_p:.2f}x")
    path = write_csv(rows, out / "async_uni_vs_multi.csv")
    with path.open("a") as f:
        f.write(f"# median TTOP multi/uni {ratio_t:.4f}; median PPS multi/uni {ratio_p:.4f}\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
