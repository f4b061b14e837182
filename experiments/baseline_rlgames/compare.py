"""gmiexp (1 GMI, 2 GMIs) against vanilla rl-games, same task and total envs, measured in one session.

    python experiments/baseline_rlgames/compare.py task=Ant total_envs=128 iterations=40

Writes results/compare.csv and results/compare.md and prints the ratios and,
for the GMI runs, where the time goes (time/sim_s, inference, train, comm).
Settings: compare.yaml here.

With an rl-games YAML instead of a gmiexp task, vanilla rl-games runs the file itself
(run_file.py: rl-games' runner, envpool vec-env and agent) and gmiexp imports it
(train=rlgames train.file=...), both with the same seed (the file's) and env count;
gmiexp with 2 GMIs runs it as rl-games' multi-GPU mode would (num_actors per process):

    python experiments/baseline_rlgames/compare.py file=rl_games:configs/mujoco/ant_envpool.yaml \
        num_envs=64 iterations=10

Writes results/file_<name>.csv and .md: the per-epoch mean rewards side by side.
Every run writes its summary.json into a run directory of its own, which is what is read
(``gmiexp.rundir``); the one-line summary each prints is echoed.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from statistics import median

import hydra
from omegaconf import DictConfig

from gmiexp.launch.summary import one_line
from gmiexp.rundir import RunFailed, run_gmiexp, run_summary, write_csv, write_report

HERE = Path(__file__).resolve().parent


def run(what: str, args: list[str], prefix: str) -> dict:
    """One run in a fresh run directory: ``gmiexp`` or a peer script here (``run_baseline.py``, ``run_file.py``)."""
    run_dir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        if what == "gmiexp":
            s = run_gmiexp(args, run_dir)
        else:
            s = run_summary([sys.executable, str(HERE / what), *args, f"hydra.run.dir={run_dir}"], run_dir)
    except RunFailed as e:
        raise SystemExit(f"failed: {what} {' '.join(args)}\n{e}") from e
    label = {"run_baseline.py": "rl_games baseline ok", "run_file.py": "rl_games file ok"}.get(what, "gmiexp ok")
    print(one_line(s).replace("gmiexp ok", label), flush=True)
    return s


@hydra.main(config_path=".", config_name="compare", version_base=None)
def main(args: DictConfig) -> None:
    if args.file:
        compare_file(args)
        return
    common = [f"task={args.task}", f"max_iterations={args.iterations}"]
    rows = []
    for rep in range(args.repeats):
        base = run("run_baseline.py", [*common, f"num_envs={args.total_envs}"], "baseline_rlgames_")
        rows.append({"run": "rl_games (1 process)", "rep": rep, **flat(base)})
        for gmis in (1, 2):
            s = run("gmiexp", [*common, "num_gpus=1", f"gmis_per_gpu={gmis}", f"num_envs={args.total_envs // gmis}",
                               "launch.progress=false"], f"gmiexp_{gmis}gmi_")
            rows.append({"run": f"gmiexp {gmis} GMI", "rep": rep, **flat(s)})
    report(rows, args)


def flat(s: dict) -> dict:
    m = s["metrics"]
    keys = ("perf/env_steps_per_s", "time/sim_s", "time/inference_s", "time/train_s", "time/comm_s", "reward/mean")
    return {k: m.get(k) for k in keys} | {"wall_s": s["wall_s"]}


def report(rows: list[dict], args: DictConfig) -> None:
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    write_csv(rows, res / "compare.csv")
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r["run"], []).append(r["perf/env_steps_per_s"])
    base = sum(by["rl_games (1 process)"]) / len(by["rl_games (1 process)"])
    lines = [f"task={args.task} total_envs={args.total_envs} iterations={args.iterations}", "",
             "| run | env steps/s | vs rl_games | sim s | inference s | train s | comm s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        lines.append(f"| {r['run']} | {r['perf/env_steps_per_s']:,.0f} | {r['perf/env_steps_per_s'] / base:.2f}x | "
                     f"{fmt(r['time/sim_s'])} | {fmt(r['time/inference_s'])} | {fmt(r['time/train_s'])} | "
                     f"{fmt(r['time/comm_s'])} |")
    lines += ["", "| run | median env steps/s | vs rl_games median |", "|---|---:|---:|"]
    base_med = median(by["rl_games (1 process)"])
    for name, vals in by.items():
        lines.append(f"| {name} | {median(vals):,.0f} | {median(vals) / base_med:.2f}x |")
    write_report(lines, res / "compare.md")


def compare_file(args: DictConfig) -> list[dict]:
    size = [f"file={args.file}", f"max_epochs={args.iterations}"] + (
        [f"num_actors={args.num_envs}"] if args.num_envs else []) + (
        [f"minibatch_size={args.minibatch_size}"] if args.minibatch_size else [])
    over = [f"max_iterations={args.iterations}"] + ([f"num_envs={args.num_envs}"] if args.num_envs else []) + (
        [f"train.minibatch_size={args.minibatch_size}"] if args.minibatch_size else [])
    runs = {"rl_games": run("run_file.py", size, "rlgames_file_")}
    for gmis in (1, 2):
        runs[f"gmiexp {gmis} GMI"] = run("gmiexp", ["train=rlgames", f"train.file={args.file}", *over, "num_gpus=1",
                                                    f"gmis_per_gpu={gmis}", "launch.progress=false"],
                                         f"gmiexp_file_{gmis}gmi_")
    rows = reward_rows(runs)
    name = Path(args.file.split(":")[-1]).stem
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    write_csv(rows, res / f"file_{name}.csv")
    text = reward_table(rows, runs, args)
    (res / f"file_{name}.md").write_text(text + "\n")
    print(text)
    return rows


def reward_rows(runs: dict[str, dict]) -> list[dict]:
    """One row per epoch: each run's mean episode reward, and whether gmiexp 1 GMI equals rl-games."""
    by = {name: {r["iteration"]: r.get("reward/mean") for r in s["history"]} for name, s in runs.items()}
    epochs = sorted(set().union(*by.values()))
    rows = []
    for ep in epochs:
        row = {"epoch": ep, **{name: by[name].get(ep) for name in runs}}
        row["identical"] = row["rl_games"] == row["gmiexp 1 GMI"]
        rows.append(row)
    return rows


def reward_table(rows: list[dict], runs: dict[str, dict], args: DictConfig) -> str:
    fmt = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
    envs = runs["rl_games"]["config"]["num_envs"]
    lines = [f"file={args.file} seed=file's envs/process={envs} iterations={args.iterations}", "",
             "| epoch | rl_games | gmiexp 1 GMI | identical | gmiexp 2 GMIs |", "|---:|---:|---:|:---:|---:|"]
    lines += [f"| {r['epoch']} | {fmt(r['rl_games'])} | {fmt(r['gmiexp 1 GMI'])} | "
              f"{'yes' if r['identical'] else 'NO'} | {fmt(r['gmiexp 2 GMI'])} |" for r in rows]
    same = sum(r["identical"] for r in rows)
    lines += ["", f"gmiexp 1 GMI equals rl-games on {same}/{len(rows)} epochs; env steps/s: "
              + ", ".join(f"{n} {s['metrics']['perf/env_steps_per_s']:,.0f}" for n, s in runs.items())]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
