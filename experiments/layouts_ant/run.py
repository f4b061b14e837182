"""One PPO in every layout: rl-games' ``ant_envpool.yaml`` in tcg_ex, tdg_ex and decoupled_async, 3 seeds.

    .venv/bin/python experiments/layouts_ant/run.py                 # settings: config.yaml

Every layout runs the same file, the same global batch (``batch.total_envs``) and the same iterations; the runs
interleave over seeds (seed k runs the layouts in an order rotated by k, so a drifting host slows each alike).
Per run: its reward curve against wall time (seconds since the command started), its final run-wide return and
its env steps/s; per seed, every layout's return at the wall time the fastest run of that seed ended (equal
wall time). The report gives each layout's mean ± standard deviation over seeds of both returns. Writes
results/layouts_ant.csv, .md and .png (reward against wall time, every seed).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import plt, save  # noqa: E402

from gmiexp.rundir import RunFailed, results_dir, run_gmiexp, write_csv, write_report  # noqa: E402
from gmiexp.stats import value_at  # noqa: E402

NAME = "layouts_ant"


def train(args: DictConfig, layout: str, seed: int) -> dict[str, Any]:
    """One run; its rows get ``t``: seconds since the command started."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"{NAME}_{layout}_"))
    cmd = ["train=rlgames", f"train.file={args.file}", f"batch.total_envs={args.total_envs}",
           f"max_iterations={args.epochs}", f"seed={seed}", "launch.progress=false", *args.layouts[layout]]
    t_cmd = time.time()
    try:
        s = run_gmiexp(cmd, run_dir)
    except RunFailed as e:
        raise SystemExit(f"failed: {layout} seed={seed}\n{e}") from e
    start = float(s["started_at"])
    rows = [{**r, "t": start + float(r["wall_s"]) - t_cmd} for r in s["history"]]
    rate = float(s["metrics"]["perf/env_steps_per_s"])
    final = next((r["reward/mean"] for r in reversed(rows) if r.get("reward/mean") is not None), None)
    print(f"{layout} seed={seed}: {len(rows)} epochs, return {final}, {rate:,.0f} env steps/s", flush=True)
    return {"rows": rows, "rate": rate, "final": final, "end": rows[-1]["t"] if rows else 0.0}


def order(layouts: list[str], k: int) -> list[str]:
    """The layouts rotated by ``k`` (seed k's run order)."""
    k %= len(layouts)
    return layouts[k:] + layouts[:k]


def spread(vals: list[float | None]) -> str:
    got = [v for v in vals if v is not None]
    if not got:
        return "-"
    sd = statistics.stdev(got) if len(got) > 1 else 0.0
    return f"{statistics.fmean(got):,.1f} ± {sd:,.1f} (n={len(got)})"


def fmt(v: float | None, spec: str = ",.1f") -> str:
    return "-" if v is None else format(v, spec)


@hydra.main(config_path=".", config_name="config", version_base=None)
def main(args: DictConfig) -> None:
    res = results_dir(args.results_dir, __file__)
    layouts = list(args.layouts)
    rows: list[dict[str, Any]] = []
    curves: dict[str, list[list[tuple[float, float]]]] = {lay: [] for lay in layouts}
    for k, seed in enumerate(args.seeds):
        runs = {lay: train(args, lay, int(seed)) for lay in order(layouts, k)}
        equal = min(r["end"] for r in runs.values())  # the wall time every run of this seed reached
        for lay, r in runs.items():
            rows.append({"seed": int(seed), "layout": lay, "order": "-".join(order(layouts, k)),
                         "final": r["final"], "at_equal_wall_s": value_at(r["rows"], equal, x="t"),
                         "equal_wall_s": round(equal, 1), "wall_s": round(r["end"], 1), "env_steps_per_s": r["rate"]})
            curves[lay].append([(x["t"], x["reward/mean"]) for x in r["rows"] if x.get("reward/mean") is not None])
        write_csv(rows, res / f"{NAME}.csv")
    lines = [f"`{args.file}`, batch.total_envs={args.total_envs}, {args.epochs} iterations, seeds "
             f"{list(args.seeds)} (interleaved; the order rotates per seed)", "",
             "| seed | layout | order | final return | return at equal wall time | equal wall s | wall s "
             "| env steps/s |",
             "|---:|:---|:---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['seed']} | {r['layout']} | {r['order']} | {fmt(r['final'])} | {fmt(r['at_equal_wall_s'])} | "
              f"{r['equal_wall_s']} | {r['wall_s']} | {fmt(r['env_steps_per_s'], ',.0f')} |" for r in rows]
    lines += [""] + [f"* {lay}: final {spread([r['final'] for r in rows if r['layout'] == lay])}; at equal wall "
                     f"time {spread([r['at_equal_wall_s'] for r in rows if r['layout'] == lay])}" for lay in layouts]
    write_report(lines, res / f"{NAME}.md")
    fig, ax = plt.subplots(figsize=(7, 4))
    for lay, color in zip(layouts, ("tab:gray", "tab:blue", "tab:orange", "tab:green"), strict=False):
        for i, pts in enumerate(curves[lay]):
            if pts:
                ax.plot(*zip(*pts, strict=True), color=color, alpha=0.7, label=lay if i == 0 else None)
    ax.set_xlabel("seconds since the command started")
    ax.set_ylabel("run-wide reward/mean")
    ax.set_title(f"{NAME}: {len(args.seeds)} seeds")
    ax.legend()
    save(fig, res / f"{NAME}.png")


if __name__ == "__main__":
    main()
