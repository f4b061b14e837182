"""What a restart costs the learning: one run straight, resumed every K epochs, re-shaped every K, and ``auto``.

    python experiments/restart_cost/run.py                # rl-games' Ant file, 64 envs in all, 100 epochs, K=10
    python experiments/restart_cost/run.py setup=smoke     # the torch cart-pole, 40 epochs, K=20, 2 seeds (a smoke)

Issue 42 made a restart go on with the same run (the checkpoint holds every GMI's generators, the simulator's state
where it can be saved, the running episodes) and made ``launch.reshape=auto`` weigh a move's cost. This measures
what is left: per seed (restart_cost.yaml's ``seeds``), these variants of one run, at the same global batch
(``batch.total_envs``) and the same epochs, in an order rotated by the seed's index (a drifting host slows each
alike):

* ``fixed1``, ``fixed2``: straight on 1 and on 2 GMIs; the **best fixed** partition is the one of the two with
  the higher return at equal wall time (per seed, and in the median for the 90% check);
* ``resumed``: fixed2's run stopped every K epochs and requeued in its run dir: the same command with
  ``max_iterations`` K, 2K, ... (``launch.resume=auto``, the requeue path of docs/slurm.md: each attempt resumes
  from the latest checkpoint, a larger ``max_iterations`` extends the run), as the resume tests stop a run.
  Every attempt is a new process, start-up included;
* ``reshaped``: one command with ``launch.reshape=request`` from 1 GMI; after epoch K - 1, 2K - 1, ... this asks
  for the other partition (1 <-> 2) as ``python -m gmiexp.tools.reshape <run_dir> gmis_per_gpu=N`` does, and the
  launcher re-shapes at its next epoch boundary (epoch K, unless the request is taken after it: the epochs each
  move happened at are recorded);
* ``auto``: one command with ``launch.reshape=auto`` from 1 GMI (plus ``auto_args``): it moves only when the move
  pays (docs/elastic.md, "When auto moves");
* ``auto2``: the same from 2 GMIs: where a ``mode=search`` run picked 2 GMIs and its ``search.json`` is in
  ``auto_args`` as ``launch.reshape_prior``, the run a user starts from the search's pick.

Per run: its run-wide return curve (``reward/mean`` of the summary's history) against frames and against wall
time from its command's start (start-up and every restart included; a requeued run's attempts back to back), its
return at equal frames and at equal wall time (the fewest frames and seconds any of the seed's runs reached,
:func:`gmiexp.stats.value_at`), its final policy over ``eval_episodes`` deterministic episodes (``mode=eval``),
the restarts it made (resumes or re-shapes), their seconds (the gap between the partitions' epochs beyond one
epoch) and what they cut (episodes and frames in progress: GMI 0's resume report, ``reshapes.jsonl``'s ``cut``
lines). Then the paired differences resumed - fixed2, reshaped - fixed2 and auto - best fixed with 95% t intervals
(:func:`gmiexp.stats.mean_interval`), and issue 42's two checks as PASS/FAIL lines.
Writes results/restart_cost.csv (one row per run), restart_cost_curves.csv, restart_cost.md and restart_cost.png
(return against frames and against wall time, one colour per variant; seeds thin, their mean thick).
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from plotting import fmt, interval_text, plt, save, spread  # noqa: E402

from gmiexp.errors import invalid  # noqa: E402
from gmiexp.launch.elastic import read_log, request  # noqa: E402
from gmiexp.rundir import (  # noqa: E402
    RunFailed,
    evaluated,
    gmiexp_command,
    read_summary,
    results_dir,
    run_gmiexp,
    stop_group,
    write_csv,
    write_report,
)
from gmiexp.stats import mean_curve, mean_interval, paired_differences, rotated, value_at  # noqa: E402

NAME = "restart_cost"
VARIANTS = ("fixed1", "fixed2", "resumed", "reshaped", "auto", "auto2")
AUTO = {"auto": 1, "auto2": 2}  # launch.reshape=auto variants: the GMIs per GPU each starts from
BEST = "best fixed"  # the better of fixed1 and fixed2 at equal wall time, seed by seed
PAIRS = (("resumed", "fixed2"), ("reshaped", "fixed2"), ("auto", BEST), ("auto2", BEST))
MEASURES = {"at_equal_frames": "return at equal frames", "at_equal_wall": "return at equal wall time",
            "eval": "evaluated final policy"}
COLOURS = {"fixed1": "tab:gray", "fixed2": "black", "resumed": "tab:blue", "reshaped": "tab:orange",
           "auto": "tab:green", "auto2": "tab:purple"}
OTHER = {1: 2, 2: 1}  # the re-shaped run's two partitions (GMIs per GPU)


def check(args: DictConfig) -> None:
    """Exit 2 naming a bad setting and the valid ones, before anything launches."""
    bad = None
    unknown = [v for v in args.variants if v not in VARIANTS]
    epochs, every = int(args.run.epochs), int(args.every)
    if unknown or not args.variants:
        bad = invalid("variants", list(args.variants), VARIANTS, "Name one or more of them")
    elif not args.seeds or len(set(args.seeds)) != len(args.seeds):
        bad = invalid("seeds", list(args.seeds), "a non-empty list of distinct integers")
    elif epochs < 2:
        bad = invalid("run.epochs", epochs, "an integer >= 2")
    elif not 1 <= every < epochs:
        bad = invalid("every", every, f"1 .. {epochs - 1} (run.epochs - 1): a restart every K epochs within the run")
    elif int(args.eval_episodes) < 0:
        bad = invalid("eval_episodes", int(args.eval_episodes), "an integer >= 0 (0: no evaluation)")
    if bad is not None:
        print(f"error: {bad}", file=sys.stderr)
        raise SystemExit(2)


def overrides(args: DictConfig, seed: int, gmis: int, epochs: int | None = None) -> list[str]:
    """What every variant's command says: the recipe, the global batch, the partition, the epochs and the seed."""
    return [*args.run.args, f"batch.total_envs={args.run.total_envs}", f"gmis_per_gpu={gmis}",
            f"max_iterations={epochs or args.run.epochs}", f"seed={seed}", "launch.progress=false"]


def timed(summary: dict[str, Any], t_cmd: float, offset: float = 0.0) -> list[dict[str, float]]:
    """The summary's rows as ``t`` (seconds since the command started, plus ``offset``), frames and return."""
    start = float(summary["started_at"])
    return [{"t": offset + start + float(r["wall_s"]) - t_cmd, "frames": float(r["frames"]),
             "iteration": int(r["iteration"]), "reward/mean": r.get("reward/mean")}
            for r in summary["history"] if r.get("frames") is not None]


def straight(args: DictConfig, seed: int, gmis: int, run_dir: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """One command to the end (fixed1, fixed2, auto): its rows, seconds and re-shapes."""
    t0 = time.time()
    s = run_gmiexp([*overrides(args, seed, gmis), *extra], run_dir, timeout_s=float(args.timeout_s))
    return {"rows": timed(s, t0), "wall_s": time.time() - t0, **reshapes(s, run_dir, gmis)}


def reshapes(summary: dict[str, Any], run_dir: Path, start: int) -> dict[str, Any]:
    """A run's re-shapes (``summary.json``) and what they cut (``reshapes.jsonl``'s ``cut`` lines)."""
    done = [r for r in summary.get("reshapes") or [] if r.get("status") == "done"]
    cuts = [r for r in read_log(run_dir) if r.get("status") == "cut"]
    path = [str(start)] + [f"{r['to']}@{r['epoch']}" for r in done]
    return {"restarts": len(done), "restart_s": sum(float(r.get("cost_s") or 0.0) for r in done),
            "episodes_cut": sum(int(c.get("episodes_cut") or 0) for c in cuts),
            "frames_cut": sum(int(c.get("frames_cut") or 0) for c in cuts), "partitions": " ".join(path)}


def resumed(args: DictConfig, seed: int, run_dir: Path) -> dict[str, Any]:
    """fixed2's run as attempts of K epochs each, requeued in its run dir; their rows back to back in time."""
    rows: list[dict[str, float]] = []
    offset, cut, frames_cut, gaps = 0.0, 0, 0, []
    ends = [*range(int(args.every), int(args.run.epochs), int(args.every)), int(args.run.epochs)]
    for end in ends:
        t0 = time.time()
        s = run_gmiexp([*overrides(args, seed, 2, end), "launch.resume=auto"], run_dir, timeout_s=float(args.timeout_s),
                       log_name=f"console_{end}.log")
        seg = timed(s, t0, offset)
        if rows and seg:
            gaps.append(seg[0]["t"] - rows[-1]["t"])
        rows += seg
        offset += time.time() - t0
        report = ((s.get("gmis") or {}).get("0") or {}).get("resume") or {}
        cut += int(report.get("episodes_cut") or 0)
        frames_cut += int(report.get("frames_cut") or 0)
    epoch_s = statistics.median([b["t"] - a["t"] for a, b in zip(rows, rows[1:], strict=False)
                                 if b["iteration"] == a["iteration"] + 1] or [0.0])
    return {"rows": rows, "wall_s": offset, "restarts": len(ends) - 1,
            "restart_s": sum(max(0.0, g - epoch_s) for g in gaps), "episodes_cut": cut, "frames_cut": frames_cut,
            "partitions": " ".join(f"2@{e}" for e in [0, *ends[:-1]])}


def last_epoch(run_dir: Path) -> int:
    """The newest epoch GMI 0 of the partition running now has written (0 before any, or while one re-shapes)."""
    try:
        lines = (run_dir / "gmis" / "0" / "history.jsonl").read_text().splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line)["iteration"])
        except (ValueError, KeyError):
            continue  # a half-written last line
    return 0


def outcome(run_dir: Path, rid: str, proc: subprocess.Popen, deadline: float) -> dict[str, Any] | None:
    """The launcher's answer to request ``rid`` (``done`` or ``refused``), None if the run ended or time ran out."""
    while proc.poll() is None and time.monotonic() < deadline:
        for rec in read_log(run_dir):
            if rec.get("request") == rid and rec.get("status") in ("done", "refused"):
                return rec
        time.sleep(0.1)
    return None


def reshaped(args: DictConfig, seed: int, run_dir: Path) -> dict[str, Any]:
    """One command from 1 GMI, asked to re-shape 1 <-> 2 after epochs K - 1, 2K - 1, ... (it moves at K, 2K ...).

    The request is what ``python -m gmiexp.tools.reshape <run_dir> gmis_per_gpu=N`` writes
    (:func:`gmiexp.launch.elastic.request`), made here so that the tool's own start-up does not delay it: the
    launcher takes it at its next poll, during epoch K, and the GMIs stop at that epoch's end.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "console.log"
    epochs, every, gmis = int(args.run.epochs), int(args.every), 1
    deadline = time.monotonic() + float(args.timeout_s)
    t0 = time.time()
    with log.open("w") as out:
        proc = subprocess.Popen(gmiexp_command([*overrides(args, seed, gmis), "launch.reshape=request"], run_dir),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            for boundary in range(every, epochs, every):
                while last_epoch(run_dir) < boundary - 1 and proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                if proc.poll() is not None or time.monotonic() >= deadline:
                    break
                gmis = OTHER[gmis]
                rec = outcome(run_dir, request(run_dir, gmis), proc, deadline)
                if rec is None or rec["status"] != "done":  # refused (a late request at the last epoch), or ended
                    print(f"reshaped seed={seed}: the request after epoch {boundary - 1} was not done: "
                          f"{rec.get('why') if rec else 'the run ended first'}", flush=True)
                    break
            rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except BaseException:
            stop_group(proc)
            raise
    if rc != 0:
        raise RunFailed(f"exit code {rc}", run_dir, log, rc)
    s = read_summary(run_dir, log)
    return {"rows": timed(s, t0), "wall_s": time.time() - t0, **reshapes(s, run_dir, 1)}


def one_run(args: DictConfig, variant: str, seed: int) -> dict[str, Any]:
    """One variant of one seed, then its final policy's evaluation."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"{NAME}_{variant}_{seed}_")) / "run"
    try:
        if variant == "resumed":
            r = resumed(args, seed, run_dir)
        elif variant == "reshaped":
            r = reshaped(args, seed, run_dir)
        elif variant in AUTO:
            r = straight(args, seed, AUTO[variant], run_dir, ("launch.reshape=auto", *args.auto_args))
        else:
            r = straight(args, seed, int(variant.removeprefix("fixed")), run_dir)
        t1 = time.time()
        r["eval"], r["eval_note"] = evaluated(run_dir, int(args.eval_episodes), int(args.eval_seed))
    except RunFailed as e:
        raise SystemExit(f"failed: {variant} seed={seed}\n{e}") from e
    rows = r["rows"]
    r |= {"variant": variant, "seed": seed, "run_dir": str(run_dir), "eval_s": round(time.time() - t1, 1),
          "frames": rows[-1]["frames"] if rows else 0.0, "epochs": rows[-1]["iteration"] if rows else 0,
          "final": rows[-1]["reward/mean"] if rows else None}
    print(f"{variant} seed={seed}: {r['epochs']} epochs, {r['frames']:,.0f} frames, {r['wall_s']:.0f} s, return "
          f"{fmt(r['final'])}, eval {fmt(r['eval']) if r['eval'] is not None else r['eval_note']}, "
          f"{r['restarts']} restarts ({r['partitions']}), {r['episodes_cut']} episodes cut", flush=True)
    return r


def seed_runs(args: DictConfig, seed: int, k: int) -> list[dict[str, Any]]:
    """Every variant for one seed, in seed k's order; each with its return at the seed's equal frames and time."""
    order = rotated(list(args.variants), k)
    runs = [one_run(args, v, seed) for v in order]
    frames = min(r["frames"] for r in runs)
    wall = min(r["rows"][-1]["t"] for r in runs if r["rows"]) if all(r["rows"] for r in runs) else 0.0
    for r in runs:
        r |= {"order": "-".join(order), "equal_frames": frames, "at_equal_frames": value_at(r["rows"], frames),
              "equal_wall_s": round(wall, 2), "at_equal_wall": value_at(r["rows"], wall, x="t"),
              "wall_s": round(r["wall_s"], 1), "restart_s": round(r["restart_s"], 2)}
    return sorted(runs, key=lambda r: VARIANTS.index(r["variant"]))


def best_fixed(rows: list[dict[str, Any]]) -> dict[int, str]:
    """Per seed, the fixed partition with the higher return at equal wall time (none where either lacks it)."""
    out = {}
    for seed in sorted({r["seed"] for r in rows}):
        fixed = {r["variant"]: r["at_equal_wall"] for r in rows if r["seed"] == seed and r["variant"] in
                 ("fixed1", "fixed2") and r["at_equal_wall"] is not None}
        if len(fixed) == 2:
            out[seed] = max(fixed, key=lambda v: fixed[v])
    return out


def paired(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per pair of PAIRS whose variant ran and measure: the seed-by-seed differences, their mean and 95% interval."""
    best = best_fixed(rows)
    ran = {r["variant"] for r in rows}
    out = []
    for a, b in [(a, b) for a, b in PAIRS if a in ran]:
        for measure in MEASURES:
            values = {(r["seed"], r["variant"]): r[measure] for r in rows}
            values |= {(s, BEST): values.get((s, v)) for s, v in best.items()}
            d = paired_differences(values, b, a)
            iv = mean_interval(d) if d else None
            out.append({"pair": f"{a} - {b}", "measure": measure, "n": len(d), "differences": d,
                        "mean": iv.mean if iv else None, "low": iv.low if iv else None,
                        "high": iv.high if iv else None, "zero_inside": iv.contains(0.0) if iv else None})
    return out


def checks(rows: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> list[str]:
    """Issue 42's done-means for item 5, each a PASS or FAIL line with its figures (or why it cannot be judged)."""
    lines = []
    resume = [p for p in pairs if p["pair"] == "resumed - fixed2" and p["measure"] in ("at_equal_frames", "eval")]
    judged = [p for p in resume if p["high"] is not None]
    if len(judged) < len(resume) or not resume:
        lines.append("* resume every K on the same partition costs no return outside the paired noise: NOT JUDGED "
                     "(needs resumed and fixed2 on two seeds or more, evaluated)")
    else:
        ok = all(p["high"] >= 0 for p in judged)
        lines.append(f"* resume every K on the same partition costs no return outside the paired noise: "
                     f"{'PASS' if ok else 'FAIL'} (" + "; ".join(
                         f"{MEASURES[p['measure']]} {fmt(p['mean'], '+,.2f')} {interval_text(p['low'], p['high'])}"
                         for p in judged) + ": a cost is an interval wholly below 0)")
    med = {v: [r["at_equal_wall"] for r in rows if r["variant"] == v and r["at_equal_wall"] is not None]
           for v in ("fixed1", "fixed2", *AUTO)}
    autos = [v for v in AUTO if med[v]] or ["auto"]  # each auto variant that ran is judged; none: auto, not judged
    for v in autos:
        name = "auto" if v == "auto" else f"{v} (auto from {AUTO[v]} GMIs)"
        if not (med["fixed1"] and med["fixed2"] and med[v]):
            lines.append(f"* {name} reaches >= 90% of the best fixed partition's return at equal wall time (median "
                         f"of the seeds): NOT JUDGED (needs fixed1, fixed2 and {v})")
            continue
        m = {k: statistics.median(med[k]) for k in ("fixed1", "fixed2", v)}
        best = max(("fixed1", "fixed2"), key=lambda k: m[k])
        bar = m[best] - 0.1 * abs(m[best])  # 90% of a positive return; as far below a negative one
        lines.append(f"* {name} reaches >= 90% of the best fixed partition's return at equal wall time (median of "
                     f"{len(med[v])} seeds): {'PASS' if m[v] >= bar else 'FAIL'} ({v} {m[v]:,.2f}, best "
                     f"fixed {best} {m[best]:,.2f}, the bar {bar:,.2f}"
                     + (f", {v} / best {m[v] / m[best]:.3f})" if m[best] > 0 else ")"))
    return lines


def report(args: DictConfig, rows: list[dict[str, Any]], took: str, res: Path) -> None:
    pairs = paired(rows)
    lines = [f"What a restart costs the learning: {args.run.label} ({' '.join(args.run.args)}), "
             f"batch.total_envs={args.run.total_envs}, {args.run.epochs} epochs, a restart every {args.every} "
             f"epochs; seeds {sorted({r['seed'] for r in rows})} (interleaved: the order rotates with the seed); "
             f"evaluation: {args.eval_episodes} deterministic episodes; auto: launch.reshape=auto "
             f"{' '.join(args.auto_args)}; {took}", "",
             "| seed | variant | order | epochs | frames | wall s | final return | return at equal frames | "
             "return at equal wall time | eval | restarts | partitions (GMIs@epoch) | restart s | episodes cut | "
             "frames cut |", "|---:|:---|:---|---:|---:|---:|---:|---:|---:|---:|---:|:---|---:|---:|---:|"]
    lines += [f"| {r['seed']} | {r['variant']} | {r['order']} | {r['epochs']} | {fmt(r['frames'], ',.0f')} | "
              f"{fmt(r['wall_s'], ',.1f')} | {fmt(r['final'])} | {fmt(r['at_equal_frames'])} | "
              f"{fmt(r['at_equal_wall'])} | {fmt(r['eval'])} | {r['restarts']} | {r['partitions']} | "
              f"{fmt(r['restart_s'], ',.1f')} | {r['episodes_cut']:,} | {r['frames_cut']:,} |" for r in rows]
    seeds = sorted({r["seed"] for r in rows})
    lines += ["", "Equal frames and wall time per seed (the fewest any variant reached): " + ", ".join(
        f"seed {s}: {fmt(next(r['equal_frames'] for r in rows if r['seed'] == s), ',.0f')} frames, "
        f"{next(r['equal_wall_s'] for r in rows if r['seed'] == s):,.1f} s" for s in seeds)
        + "; best fixed per seed (at equal wall time): "
        + (", ".join(f"{s}: {v}" for s, v in best_fixed(rows).items()) or "- (needs fixed1 and fixed2 at that time)"),
        "", "Paired differences (seed by seed; their mean and 95% t interval; where 0 is inside, no effect of the "
        "restarts is measured):", "", "| pair | measure | per seed | mean | 95% interval | 0 inside |",
        "|:---|:---|:---|---:|:---|:---|"]
    lines += [f"| {p['pair']} | {MEASURES[p['measure']]} | {', '.join(f'{d:+.2f}' for d in p['differences']) or '-'}"
              f" | {fmt(p['mean'], '+,.2f')} | {interval_text(p['low'], p['high'])} | "
              f"{ {True: 'yes', False: '**no**', None: '-'}[p['zero_inside']] } |" for p in pairs]
    lines += ["", *checks(rows, pairs), ""]
    for v in args.variants:
        sel = [r for r in rows if r["variant"] == v]
        lines.append(f"* {v}: return at equal frames {spread([r['at_equal_frames'] for r in sel])}; at equal wall "
                     f"time {spread([r['at_equal_wall'] for r in sel])}; evaluated {spread([r['eval'] for r in sel])}; "
                     f"wall {spread([r['wall_s'] for r in sel], ',.1f')} s")
    lines += [f"* {n}" for n in sorted({f"{r['variant']} seed {r['seed']}: {r['eval_note']}" for r in rows
                                         if r["eval_note"] != "ok"})]
    write_report(lines, res / f"{NAME}.md")


def plot(rows: list[dict[str, Any]], res: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, x, label in ((axes[0], "frames", "frames"), (axes[1], "t", "seconds since the command started")):
        for v in VARIANTS:
            curves = [[(p[x], p["reward/mean"]) for p in r["rows"] if p["reward/mean"] is not None]
                      for r in rows if r["variant"] == v]
            for c in curves:
                if c:
                    ax.plot(*zip(*c, strict=True), color=COLOURS[v], alpha=0.3, linewidth=0.8)
            mean = mean_curve(curves)
            if mean:
                ax.plot(*zip(*mean, strict=True), color=COLOURS[v], linewidth=2.0, label=f"{v}, mean of {len(curves)}")
        ax.set_xlabel(label)
        ax.set_ylabel("run-wide reward/mean")
        ax.legend(fontsize=8)
    axes[0].set_title("return at equal frames", fontsize=9)
    axes[1].set_title("return at equal wall time (start-up and restarts included)", fontsize=9)
    save(fig, res / f"{NAME}.png")


def write_tables(rows: list[dict[str, Any]], res: Path) -> None:
    write_csv([{k: v for k, v in r.items() if k != "rows"} for r in rows], res / f"{NAME}.csv")
    write_csv([{"seed": r["seed"], "variant": r["variant"], "iteration": p["iteration"], "t": round(p["t"], 3),
                "frames": p["frames"], "reward_mean": p["reward/mean"]} for r in rows for p in r["rows"]],
              res / f"{NAME}_curves.csv", fieldnames=["seed", "variant", "iteration", "t", "frames", "reward_mean"])


INTS = ("seed", "epochs", "restarts", "episodes_cut", "frames_cut")
FLOATS = ("frames", "wall_s", "final", "eval", "eval_s", "restart_s", "equal_frames", "equal_wall_s",
          "at_equal_frames", "at_equal_wall")


def read_tables(res: Path) -> list[dict[str, Any]]:
    """The rows :func:`write_tables` wrote (after every seed), typed again: a stopped study's seeds so far."""
    def number(v: str, kind: type) -> Any:
        return None if v == "" else kind(float(v))

    with (res / f"{NAME}.csv").open() as f:
        rows = [{**r, **{k: number(r[k], int) for k in INTS}, **{k: number(r[k], float) for k in FLOATS}, "rows": []}
                for r in csv.DictReader(f)]
    by = {(r["seed"], r["variant"]): r for r in rows}
    with (res / f"{NAME}_curves.csv").open() as f:
        for p in csv.DictReader(f):
            by[int(p["seed"]), p["variant"]]["rows"].append(
                {"t": float(p["t"]), "frames": float(p["frames"]), "iteration": int(p["iteration"]),
                 "reward/mean": number(p["reward_mean"], float)})
    return rows


@hydra.main(config_path=".", config_name=NAME, version_base=None)
def main(args: DictConfig) -> None:
    check(args)
    res = results_dir(args.results_dir, __file__, create=not args.report_only)
    if args.report_only:  # a study stopped after some seeds: its report and figure from the tables so far
        if not (res / f"{NAME}.csv").is_file() or not (res / f"{NAME}_curves.csv").is_file():
            bad = invalid("report_only", True, "false, or a results_dir holding a study's tables")
            print(f"error: {bad}: {res} has no {NAME}.csv and {NAME}_curves.csv", file=sys.stderr)
            raise SystemExit(2)
        rows = read_tables(res)
        took = sum(r["wall_s"] + r["eval_s"] for r in rows)
        report(args, rows, f"rebuilt from its tables (its runs and evaluations took {took:,.0f} s)", res)
        plot(rows, res)
        return
    t0 = time.time()
    rows: list[dict[str, Any]] = []
    for k, seed in enumerate(args.seeds):
        rows += seed_runs(args, int(seed), k)
        write_tables(rows, res)
    report(args, rows, f"the whole study took {time.time() - t0:,.0f} s", res)
    plot(rows, res)


if __name__ == "__main__":
    main()
