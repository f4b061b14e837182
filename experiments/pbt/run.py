"""PBT against the same members without it: 4 members, learning rates log-uniform, interleaved repetitions.

    python experiments/pbt/run.py                  # rl-games' Ant file (setup=ant), 3 repetitions
    python experiments/pbt/run.py setup=smoke      # the torch cart-pole, 1 repetition: a look, not a measurement

Issue 43's study. Each repetition runs one population twice (``python -m gmiexp pbt=default pbt.population=4
'+pbt.init={train.learning_rate:[1e-5,1e-2]}' ...``), the arms in an order that alternates with the repetition, so
a drifting host slows both alike: the PBT arm with the anchors' rule and mutations, exploiting in place; the fixed
arm with a grace period past the run's end (``pbt.initial_delay``), so no member is ever replaced or mutated. Both
arms have the same seed (so the same drawn learning rates and member seeds), epochs, pack slots and interval
synchronisation; the project has no wall-clock limit for a run, so the arms get equal epochs and each one's wall
time is reported. Per repetition: every member's final policy over ``eval_episodes`` deterministic episodes
(``mode=eval``), each arm's median and best member, the exploits done and their cost in place (from the population's
lineage, read by ``exploit_cost.py``'s functions). Across repetitions the done-means checks as PASS/FAIL lines, and
the cost of one exploit in place against ``pbt.exploit=restart`` from ``exploit_cost.py``'s results (its one home;
``exploit_cost.run=true`` runs it first). Writes results/pbt_vs_fixed_<setup>.csv (one row per member),
_reps.csv, _curves.csv, .md and .png (each member's return against wall time, PBT arm against fixed arm).

A study can grow over several sittings: ``first_rep=3 reps=3 results_dir=B`` runs repetitions 3-5 (seeds 4-6), and
``reps=0 merge=[A,B] results_dir=C`` reports over every finished repetition of A and B without running anything
(each repetition's populations and evaluations must have run as this command would run them, and none may appear
twice). ``fixed_from=[A,...]`` takes each repetition's fixed arm from a finished study that ran it as this command
would (populations repeat bit for bit from their seed), so only the PBT arm trains here: the report checks that its
members' curves equal the reused fixed arm's up to the first exploit, and marks those wall times as another sitting's.
``runs_dir=<a study's runs_*>`` goes on with a study that stopped: a population that finished there as this run would
start it is collected with its evaluations, not trained again.
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import exploit_cost  # noqa: E402
from plotting import fmt, plt, save, spread  # noqa: E402

from gmiexp.pbt import views  # noqa: E402
from gmiexp.rundir import (  # noqa: E402
    RunFailed,
    eval_std,
    evaluated,
    gmiexp_command,
    log_tail,
    read_summary,
    results_dir,
    run_gmiexp,
    run_logged,
    write_csv,
    write_report,
)
from gmiexp.stats import mean_interval  # noqa: E402
from gmiexp.status import read_history  # noqa: E402

NAME = "pbt_vs_fixed"
ARMS = ("pbt", "fixed")
MIN_REPS = 3  # the done-means: at least 3 repetitions
CHEAPER = 10.0  # the done-means: an in-place exploit at least 10x cheaper than a restart
LR = "train.learning_rate"


def usage_error(reasons: Sequence[str]) -> None:
    """Exit 2 with every reason, before anything launches."""
    print("pbt/run.py: error: " + "; ".join(reasons), file=sys.stderr)
    raise SystemExit(2)


def check_settings(cfg: DictConfig) -> None:
    """The script's own settings (gmiexp checks the populations' with ``mode=plan``): exit 2 naming each bad one."""
    reasons = []
    least = 0 if cfg.merge else 1
    if not isinstance(cfg.reps, int) or cfg.reps < least:
        reasons.append(f"invalid reps={cfg.reps}; valid: an integer >= {least} (0 only with merge; the checks need "
                       f">= {MIN_REPS} in all)")
    if not isinstance(cfg.first_rep, int) or cfg.first_rep < 0:
        reasons.append(f"invalid first_rep={cfg.first_rep}; valid: an integer >= 0 (the index of the first "
                       "repetition run here)")
    if not isinstance(cfg.eval_episodes, int) or cfg.eval_episodes < 0:
        reasons.append(f"invalid eval_episodes={cfg.eval_episodes}; valid: an integer >= 0 (0: no evaluation)")
    if set(cfg.arms) != set(ARMS):
        reasons.append(f"invalid arms={sorted(cfg.arms)}; valid: exactly {list(ARMS)}")
    if reasons:
        usage_error(reasons)


def settings(cfg: DictConfig) -> list[str]:
    """The report's lines that say what ran: the setup, epochs and interval, the evaluation, both arms' overrides."""
    s = cfg.setup
    return [f"PBT against fixed members: {s.label}; {s.epochs} epochs, interval {s.interval_steps} env steps",
            f"evaluation: {cfg.eval_episodes} deterministic episodes",
            f"* both arms: {' '.join([*s.args, *cfg.members, *cfg.extra])}",
            f"* PBT arm: {' '.join(cfg.arms.pbt) or '(pbt=default as it is)'}; fixed arm: {' '.join(cfg.arms.fixed)}"]


INTS = {"rep", "seed", "member", "lives", "exploits_taken", "exploits", "life", "frames", "first_change",
        "same_epochs", "same_as_fixed"}
TEXT = {"arm", "order", "eval_note", "run_dir", "reused_from"}


def typed(row: dict[str, str]) -> dict[str, Any]:
    """One CSV row as :func:`write_tables` had it: empty cells None, counts int, figures float."""
    return {k: v if k in TEXT else None if v == "" else int(v) if k in INTS else float(v) for k, v in row.items()}


def read_rows(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [typed(r) for r in csv.DictReader(f)]


def finished_study(cfg: DictConfig, where: Path) -> tuple[list[dict[str, dict[str, Any]]], list[str]]:
    """A results dir's finished repetitions, rebuilt from its tables, or the reasons it cannot join this study.

    What a repetition ran is what its populations and evaluations recorded (:func:`ran_otherwise`), so the
    repetitions a study finished before it stopped join as well as a whole study's.
    """
    reps, why = finished_arms(cfg, where, ARMS, "merge")
    return [reps[r] for r in sorted(reps) if set(reps[r]) == set(ARMS)], why


def finished_arms(cfg: DictConfig, where: Path, wanted: Sequence[str],
                  role: str) -> tuple[dict[int, dict[str, dict[str, Any]]], list[str]]:
    """The ``wanted`` arms a results dir finished, by repetition, each checked against this run's command for it."""
    base = where / f"{NAME}_{cfg.setup.name}"
    reps_csv = base.parent / f"{base.name}_reps.csv"
    if not reps_csv.is_file():
        return {}, [f"{role}: {where} has no {reps_csv.name} (no repetition of setup={cfg.setup.name} finished)"]
    arms = [a for a in read_rows(reps_csv) if a["arm"] in wanted]
    differ = [why for a in arms for why in ran_otherwise(cfg, a)]
    if differ:
        return {}, [f"{role}: {where} ran other settings: " + "; ".join(differ[:3])
                    + (f"; and {len(differ) - 3} more" if len(differ) > 3 else "")]
    curves: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for c in read_rows(base.parent / f"{base.name}_curves.csv"):
        curves.setdefault((c.pop("rep"), c.pop("arm"), c.pop("member")), []).append(c)
    members: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for m in read_rows(base.parent / f"{base.name}.csv"):
        members.setdefault((m["rep"], m["arm"]), []).append({**m, "curve": curves.get((m["rep"], m["arm"],
                                                                                        m["member"]), [])})
    reps: dict[int, dict[str, dict[str, Any]]] = {}
    for a in arms:
        got = members.get((a["rep"], a["arm"]), [])
        if any("eval_std" not in m for m in got):  # a table from before eval_std: its evaluations' own summaries
            where_ = member_dirs(Path(a["run_dir"]))
            got = [{**m, "eval_std": eval_std(where_[m["member"]]) if m["member"] in where_ else None} for m in got]
        reps.setdefault(a["rep"], {})[a["arm"]] = {**a, "members": got}
    return reps, []


def recorded(run_dir: Path) -> list[str] | None:
    """The overrides a gmiexp run was started with (Hydra's ``.hydra/overrides.yaml``), None without the record."""
    f = run_dir / ".hydra" / "overrides.yaml"
    return [str(x) for x in OmegaConf.load(f)] if f.is_file() else None


def ran_otherwise(cfg: DictConfig, arm: dict[str, Any]) -> list[str]:
    """Where one arm of a repetition ran other than this run would: its population's command, its evaluations'."""
    rep, name, run_dir = arm["rep"], arm["arm"], Path(arm["run_dir"])
    got, want = recorded(run_dir), overrides(cfg, name, int(cfg.seed) + rep)
    if got is None:
        return [f"repetition {rep} {name}: no record of its command ({run_dir / '.hydra' / 'overrides.yaml'})"]
    if got != want:
        return [f"repetition {rep} {name} ran {sorted(set(got) - set(want)) or got} where this run has "
                f"{sorted(set(want) - set(got)) or want}"]
    asked = {f"eval.episodes={cfg.eval_episodes}", f"seed={cfg.eval_seed}"} if cfg.eval_episodes else set()
    return [f"repetition {rep} {name} member {m}'s evaluation ran {recorded(d / 'eval')}, not {sorted(asked)}"
            for m, d in sorted(member_dirs(run_dir).items()) if not asked <= set(recorded(d / "eval") or ())]


def member_dirs(population_dir: Path) -> dict[int, Path]:
    """Each member's last life's run dir, as the population's summary names it ({} without one)."""
    try:
        return {int(m["member"]): Path(m["run_dir"]) for m in read_summary(population_dir)["members"]}
    except RunFailed:
        return {}


def merged(cfg: DictConfig) -> list[dict[str, dict[str, Any]]]:
    """Every repetition of the ``merge`` dirs; exit 2 naming each dir that cannot join and each repetition twice."""
    reps, reasons = [], []
    for d in cfg.merge:
        where = Path(d) if Path(d).is_absolute() else ROOT / d
        got, why = finished_study(cfg, where)
        reps += got
        reasons += why
    here = range(int(cfg.first_rep), int(cfg.first_rep) + int(cfg.reps))
    seen = [r["pbt"]["rep"] for r in reps] + list(here)
    twice = sorted({r for r in seen if seen.count(r) > 1})
    if twice:
        reasons.append(f"merge: repetition(s) {twice} twice (in the merged dirs or also run here as first_rep="
                       f"{cfg.first_rep} reps={cfg.reps}); valid: each repetition once")
    if reasons:
        usage_error(reasons)
    return reps


def reused(cfg: DictConfig) -> dict[int, dict[str, Any]]:
    """The fixed arms of the ``fixed_from`` dirs by repetition; exit 2 naming each dir that cannot stand in.

    A population repeats bit for bit from its seed (its members wait for every verdict at each interval's end, so
    nothing depends on timing), so a finished fixed arm whose recorded command is this run's is this run's fixed arm.
    """
    out: dict[int, dict[str, Any]] = {}
    reasons, twice = [], set()
    for d in cfg.fixed_from:
        where = Path(d) if Path(d).is_absolute() else ROOT / d
        got, why = finished_arms(cfg, where, ("fixed",), "fixed_from")
        reasons += why
        for rep, arms in got.items():
            if rep in out:
                twice.add(rep)
            out[rep] = {**arms["fixed"], "reused_from": str(where)}
    if twice:
        reasons.append(f"fixed_from: repetition(s) {sorted(twice)} in more than one dir; valid: each once")
    if reasons:
        usage_error(reasons)
    return out


def agreement(pbt: dict[str, Any], fixed: dict[str, Any]) -> tuple[int, bool]:
    """Epochs compared and whether every member's return equals the fixed arm's up to the PBT arm's first change.

    Both arms are the same population until the first exploit or mutation (``first_change``, frames), so a reused
    fixed arm that differs before it is not this run's population.
    """
    until = pbt.get("first_change")

    def before(member: dict[str, Any]) -> list[tuple[int, float | None]]:
        return [(c["frames"], c["reward"]) for c in member["curve"]
                if c["life"] == 0 and (until is None or c["frames"] <= until)]

    def equal(a: float | None, b: float | None) -> bool:  # read back from a CSV: to its last digits
        return a == b or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-12))

    compared, same = 0, True
    for p, f in zip(pbt["members"], fixed["members"], strict=True):
        mine, theirs = before(p), before(f)
        compared += len(mine)
        same = same and len(mine) == len(theirs) and all(
            a[0] == b[0] and equal(a[1], b[1]) for a, b in zip(mine, theirs, strict=True))
    return compared, same


def overrides(cfg: DictConfig, arm: str, seed: int) -> list[str]:
    """One arm's population: the setup's args, the members', the epochs, interval and seed, extra, the arm's own."""
    s = cfg.setup
    return [*s.args, *cfg.members, f"max_iterations={s.epochs}", f"pbt.interval_steps={s.interval_steps}",
            f"seed={seed}", *cfg.extra, *cfg.arms[arm]]


def plan_both(cfg: DictConfig) -> None:
    """``mode=plan`` of each arm's population first: a bad override exits 2 here, before any training."""
    for arm in ARMS:
        run_dir = Path(tempfile.mkdtemp(prefix=f"{NAME}_plan_{arm}_"))
        log = run_dir / "console.log"
        rc = run_logged(gmiexp_command([*overrides(cfg, arm, int(cfg.seed)), "mode=plan"], run_dir), log, 600)
        if rc == 2:
            usage_error([f"the {arm} arm's population is refused by gmiexp: "
                         + " ".join(ln.split("gmiexp: error:", 1)[1].strip() for ln in log.read_text().splitlines()
                                    if "gmiexp: error:" in ln)])
        if rc != 0:
            raise SystemExit(f"failed: mode=plan of the {arm} arm ({'timeout' if rc is None else f'exit {rc}'})\n"
                             f"{log_tail(log)}")


def order(rep: int) -> tuple[str, ...]:
    """Repetition ``rep``'s arms: PBT first in even repetitions, the fixed arm first in odd ones."""
    return ARMS if rep % 2 == 0 else ARMS[::-1]


def curve(member_dir: Path, t0: float) -> list[dict[str, Any]]:
    """Every epoch of every life of one member: seconds since the command started, frames, run-wide return."""
    lives = sorted(member_dir.glob("life*"), key=lambda p: int(p.name[4:]))
    return [{"life": int(life.name[4:]), "t": float(r["time"]) - t0, "frames": int(r["frames"]),
             "reward": r.get("reward/mean")} for life in lives for r in read_history(life)]


def finished_before(cfg: DictConfig, arm: str, seed: int, run_dir: Path) -> tuple[dict[str, Any], float] | None:
    """A population that finished in ``run_dir`` as this run would start it: its summary and start time, else None.

    ``runs_dir`` names a study's populations dir, so a study that stopped part way goes on without training again
    what it finished (its start: when Hydra recorded its command).
    """
    record = run_dir / ".hydra" / "overrides.yaml"
    if recorded(run_dir) != overrides(cfg, arm, seed):
        return None
    try:
        s = read_summary(run_dir)
    except RunFailed:
        return None
    return (s, record.stat().st_mtime) if s.get("status") == "ok" else None


def member_eval(cfg: DictConfig, run_dir: Path, collected: bool) -> tuple[float | None, str]:
    """A member's evaluation: ``mode=eval`` now, or for a ``collected`` population the one already in its run dir
    when it ran as asked."""
    asked = {f"eval.episodes={cfg.eval_episodes}", f"seed={cfg.eval_seed}"}
    if collected and cfg.eval_episodes and asked <= set(recorded(run_dir / "eval") or ()):
        try:
            return float(read_summary(run_dir / "eval")["metrics"]["eval/return_mean"]), "ok"
        except (RunFailed, KeyError, TypeError, ValueError):
            pass
    try:
        return evaluated(run_dir, int(cfg.eval_episodes), int(cfg.eval_seed))
    except RunFailed as e:
        raise SystemExit(f"failed: mode=eval of {run_dir}\n{e}") from e


def population(cfg: DictConfig, arm: str, rep: int, seed: int, runs: Path) -> dict[str, Any]:
    """One arm of one repetition: run it (unless it finished in ``runs`` before), then evaluate each member; its
    members' rows, curves and exploits."""
    run_dir = runs / f"r{rep}_{arm}"
    before = finished_before(cfg, arm, seed, run_dir)
    if before is not None:
        s, t0 = before
        wall = float(s["wall_s"])
        print(f"repetition {rep} {arm:>5}: finished in {run_dir} before; not trained again", flush=True)
    else:
        t0 = time.time()
        try:
            s = run_gmiexp(overrides(cfg, arm, seed), run_dir, timeout_s=float(cfg.timeout_s))
        except RunFailed as e:
            raise SystemExit(f"failed: the {arm} arm of repetition {rep}\n{e}") from e
        wall = time.time() - t0
    evs = views.events(run_dir)
    if arm == "fixed" and s["exploits"]:
        raise SystemExit(f"the fixed arm exploited {s['exploits']} times ({run_dir}): its overrides {cfg.arms.fixed} "
                         "do not hold every member back")
    lineage = views.lineage(evs)
    first = {e["member"]: e["values"] for e in evs if e.get("event") == "start" and e.get("life") == 0}
    members = []
    for m in s["members"]:
        member = int(m["member"])
        ev, note = member_eval(cfg, Path(m["run_dir"]), collected=before is not None)
        members.append({"rep": rep, "seed": seed, "arm": arm, "member": member, "lr_start": first[member].get(LR),
                        "lr_end": m["values"].get(LR), "lives": m["lives"],
                        "exploits_taken": sum(r["member"] == member for r in lineage),
                        "final_return": m["return"], "eval": ev,
                        "eval_std": eval_std(Path(m["run_dir"])) if ev is not None else None, "eval_note": note,
                        "curve": curve(run_dir / "members" / str(member), t0)})
    costs = exploit_cost.inplace_costs(evs) + exploit_cost.restart_costs(evs)
    changes = [int(r["frames"]) for r in lineage if r.get("frames") is not None]
    print(f"repetition {rep} {arm:>5}: {s['exploits']} exploits, {wall:,.0f} s; evaluated "
          f"{[m['eval'] for m in members]}", flush=True)
    return {"rep": rep, "seed": seed, "arm": arm, "order": "-".join(order(rep)), "wall_s": round(wall, 1),
            "population_wall_s": round(float(s["wall_s"]), 1), "exploits": int(s["exploits"]),
            "exploit_s_median": median([c["seconds"] for c in costs]),
            "frames_lost_median": median([c["frames_lost"] for c in costs]),
            "median_eval": median([m["eval"] for m in members]), "best_eval": best([m["eval"] for m in members]),
            "median_final": median([m["final_return"] for m in members]),
            "best_final": best([m["final_return"] for m in members]), "members": members, "run_dir": str(run_dir),
            "first_change": min(changes) if changes else None}


def median(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def best(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return max(got) if got else None


@dataclass(frozen=True)
class Check:
    """One done-means line: what, PASS or FAIL, and the figures it was judged on."""

    what: str
    ok: bool
    why: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'}: {self.what} ({self.why})"


def paired(reps: Sequence[dict[str, dict[str, Any]]], key: str) -> list[float] | None:
    """PBT minus fixed of ``key`` repetition by repetition; None when a repetition lacks it."""
    d = [r["pbt"][key] - r["fixed"][key] if r["pbt"][key] is not None and r["fixed"][key] is not None else None
         for r in reps]
    return None if None in d else d  # type: ignore[return-value]


def compare_checks(reps: Sequence[dict[str, dict[str, Any]]]) -> list[Check]:
    """The done-means on the evaluated policies, per repetition and beyond the repetitions' spread.

    The spread is the 95% t interval of the paired differences (PBT - fixed) over the repetitions
    (:func:`gmiexp.stats.mean_interval`), not a ratio: Ant's returns can be near zero or negative. The median check
    passes when every repetition's difference is above 0 and so is the interval's low end; the best check when no
    repetition's difference lies below 0 by more than the interval's half-width.
    """
    med_what = "in every repetition the PBT median member evaluates above the fixed median member, beyond the spread"
    best_what = "in every repetition the PBT best member evaluates no lower than the fixed best, beyond the spread"
    out = []
    for key, what in (("median_eval", med_what), ("best_eval", best_what)):
        d = paired(reps, key)
        if d is None:
            out.append(Check(what, False, "a repetition has no evaluated member"))
            continue
        shown = ", ".join(f"{x:+,.2f}" for x in d)
        if len(d) < MIN_REPS:
            out.append(Check(what, False, f"{len(d)} repetition(s), the check needs at least {MIN_REPS}: {shown}"))
            continue
        iv = mean_interval(d)
        assert iv.half is not None and iv.low is not None
        span = f"PBT - fixed per repetition {shown}; mean {iv.mean:+,.2f}, 95% interval [{iv.low:+,.2f}, " \
               f"{iv.high:+,.2f}]"
        ok = all(x > 0 for x in d) and iv.low > 0 if key == "median_eval" else all(x >= -iv.half for x in d)
        out.append(Check(what, ok, span))
    return out


def exploit_cost_rows(cfg: DictConfig, res: Path) -> tuple[list[dict[str, Any]], Path]:
    """exploit_cost.py's per-exploit rows: run it first (``exploit_cost.run``), else read its CSV (none: [])."""
    if cfg.exploit_cost.run:  # into the results dir, where the next run without run=true reads it
        log = res / "exploit_cost.log"
        rc = run_logged([sys.executable, str(HERE / "exploit_cost.py"), f"results_dir={res}",
                         *cfg.exploit_cost.overrides], log, cwd=ROOT)
        if rc != 0:
            raise SystemExit(f"failed: exploit_cost.py (exit {rc}): {log}\n{log_tail(log)}")
        path = res / "exploit_cost.csv"
    elif cfg.exploit_cost.csv is None:
        path = res / "exploit_cost.csv"
    else:
        path = Path(cfg.exploit_cost.csv)
        path = path if path.is_absolute() else ROOT / path
    if not path.is_file():
        return [], path
    with path.open() as f:
        return [{**r, "seconds": float(r["seconds"]), "frames_lost": float(r["frames_lost"])}
                for r in csv.DictReader(f)], path


def cost_check(rows: Sequence[dict[str, Any]], path: Path) -> tuple[list[str], Check]:
    """Median seconds and frames lost per exploit, in place and by restart, and the 10x check."""
    lines, med = [], {}
    for mode in ("inplace", "restart"):
        r = [x for x in rows if x["exploit"] == mode]
        if r:
            med[mode] = statistics.median(x["seconds"] for x in r)
            lines.append(f"* {mode}: {len(r)} exploits; decision to training again median {med[mode]:.2f} s "
                         f"({min(x['seconds'] for x in r):.2f}-{max(x['seconds'] for x in r):.2f}); frames thrown "
                         f"away median {statistics.median(x['frames_lost'] for x in r):,.0f} "
                         f"(max {max(x['frames_lost'] for x in r):,.0f})")
    what = f"an in-place exploit at least {CHEAPER:g}x cheaper than a restart (median seconds, {path})"
    if len(med) < 2:
        return lines, Check(what, False, "not measured: run experiments/pbt/exploit_cost.py or exploit_cost.run=true")
    ratio = med["restart"] / med["inplace"] if med["inplace"] > 0 else float("inf")
    return lines, Check(what, ratio >= CHEAPER, f"restart / in place {ratio:,.0f}x")


def report(cfg: DictConfig, reps: list[dict[str, dict[str, Any]]], cost: tuple[list[str], Check], took_s: float,
           res: Path) -> list[Check]:
    s = cfg.setup
    checks = [*compare_checks(reps), cost[1]]
    if any(r["fixed"].get("reused_from") for r in reps):
        differ = [r["pbt"]["rep"] for r in reps if r["fixed"].get("reused_from") and not r["pbt"].get("same_as_fixed")]
        checks.append(Check("every reused fixed arm is this run's population (equal returns before the first change)",
                            not differ, f"repetition(s) {differ} differ" if differ else "all equal"))
    head, evaluation, both, arms = settings(cfg)
    seeds = ", ".join(str(r["pbt"]["seed"]) for r in reps)
    lines = [f"{head}; {len(reps)} repetition(s), seeds {seeds} (interleaved: the order alternates); {evaluation}; "
             f"the study took {took_s:,.0f} s" + (f" here, with repetitions merged from {list(cfg.merge)}"
                                                  if cfg.merge else ""), "", both, arms,
             "* equal epochs, not a wall-clock limit (gmiexp has no time limit for a run); each arm's wall time below",
             "", "| rep | seed | order | arm | wall s | exploits | exploit s (median) | lr start -> end per member | "
             "evaluated per member (mean ± sd) | median | best | final return median | best |",
             "|---:|---:|:---|:---|---:|---:|---:|:---|:---|---:|---:|---:|---:|"]
    for r in reps:
        for arm in ARMS:
            a = r[arm]
            lrs = ", ".join(f"{fmt(m['lr_start'], '.1e')}->{fmt(m['lr_end'], '.1e')}" for m in a["members"])
            evs = ", ".join(evaluation_text(m) for m in a["members"])
            lines.append(f"| {a['rep']} | {a['seed']} | {a['order']} | {arm} | {a['wall_s']:,.0f} | {a['exploits']} | "
                         f"{fmt(a['exploit_s_median'])} | {lrs} | {evs} | "
                         f"{fmt(a['median_eval'])} | {fmt(a['best_eval'])} | {fmt(a['median_final'])} | "
                         f"{fmt(a['best_final'])} |")
    lines.append("")
    for arm in ARMS:
        lines.append(f"* {arm}: median member evaluated {spread([r[arm]['median_eval'] for r in reps])}, best "
                     f"{spread([r[arm]['best_eval'] for r in reps])}; wall "
                     f"{spread([r[arm]['wall_s'] for r in reps])} s")
    walls = [f"{r['pbt']['wall_s'] / r['fixed']['wall_s']:.2f}" + ("*" if r["fixed"].get("reused_from") else "")
             for r in reps if r["fixed"]["wall_s"]]
    lines.append(f"* wall time PBT / fixed per repetition: {', '.join(walls)}")
    lines += [f"* repetition {r['pbt']['rep']}'s fixed arm was reused from {r['fixed']['reused_from']} (*: its wall "
              f"time is that sitting's); the PBT arm's members "
              f"{'equal' if r['pbt'].get('same_as_fixed') else 'DIFFER FROM'} it over the "
              f"{r['pbt'].get('same_epochs')} member-epochs before the first exploit or mutation"
              for r in reps if r["fixed"].get("reused_from")]
    notes = sorted({m["eval_note"] for r in reps for arm in ARMS for m in r[arm]["members"] if m["eval_note"] != "ok"})
    lines += [f"* {n}" for n in notes]
    lines += ["", "The cost of one exploit, in place against pbt.exploit=restart (experiments/pbt/exploit_cost.py):",
              "", *(cost[0] or ["* not measured"]), "", "Done-means checks:", "", *(c.line() for c in checks)]
    write_report(lines, res / f"{NAME}_{s.name}.md")
    return checks


def evaluation_text(member: dict[str, Any]) -> str:
    """A member's evaluated mean return, and its episodes' standard deviation where it was recorded."""
    std = member.get("eval_std")
    return fmt(member["eval"]) + (f" ± {std:,.0f}" if member["eval"] is not None and std is not None else "")


def plot(cfg: DictConfig, reps: list[dict[str, dict[str, Any]]], res: Path) -> None:
    """One panel per repetition: each member's run-wide return against wall time, PBT arm against fixed arm."""
    cols = min(3, len(reps))
    rows = math.ceil(len(reps) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    for ax in axes.flat[len(reps):]:
        ax.set_visible(False)
    for ax, r in zip(axes.flat, reps, strict=False):
        for arm, colour, style in (("fixed", "tab:gray", "--"), ("pbt", "tab:blue", "-")):
            for i, m in enumerate(r[arm]["members"]):
                for life in sorted({p["life"] for p in m["curve"]}):
                    pts = [(p["t"], p["reward"]) for p in m["curve"] if p["life"] == life and p["reward"] is not None]
                    if pts:
                        ax.plot(*zip(*pts, strict=True), color=colour, linestyle=style, alpha=0.4 + 0.15 * i,
                                linewidth=1.2, label=f"{arm} arm ({len(r[arm]['members'])} members)"
                                if i == 0 and life == 0 else None)
        ax.set_xlabel("seconds since the arm's command started")
        ax.set_ylabel("run-wide reward/mean")
        ax.set_title(f"repetition {r['pbt']['rep']} (seed {r['pbt']['seed']}): {r['pbt']['exploits']} exploits",
                     fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle(f"PBT against fixed members: {cfg.setup.label}", fontsize=10)
    save(fig, res / f"{NAME}_{cfg.setup.name}.png")


def columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every key of the rows, in the order first seen: a reused arm has columns a trained one lacks, and back."""
    return list(dict.fromkeys(k for r in rows for k in r))


def write_tables(cfg: DictConfig, reps: list[dict[str, dict[str, Any]]], res: Path) -> None:
    base = f"{NAME}_{cfg.setup.name}"
    arms = [r[arm] for r in reps for arm in ARMS]
    members = [{k: v for k, v in m.items() if k != "curve"} for a in arms for m in a["members"]]
    write_csv(members, res / f"{base}.csv", fieldnames=columns(members))
    rows = [{k: v for k, v in a.items() if k != "members"} for a in arms]
    write_csv(rows, res / f"{base}_reps.csv", fieldnames=columns(rows))
    write_csv([{"rep": a["rep"], "arm": a["arm"], "member": m["member"], **p} for a in arms for m in a["members"]
               for p in m["curve"]], res / f"{base}_curves.csv",
              fieldnames=["rep", "arm", "member", "life", "t", "frames", "reward"])


def run(cfg: DictConfig) -> list[Check]:
    """The study: check, plan both arms, run the repetitions interleaved, write the tables, report and figure."""
    check_settings(cfg)
    reps = merged(cfg)
    reuse = reused(cfg) if cfg.reps else {}
    if cfg.reps:
        plan_both(cfg)
    res = results_dir(cfg.results_dir, __file__)
    cost = exploit_cost_rows(cfg, res)
    t0 = time.time()
    if cfg.reps:
        runs = (ROOT / cfg.runs_dir if cfg.runs_dir else Path(tempfile.mkdtemp(prefix=f"runs_{cfg.setup.name}_",
                                                                               dir=res)))
    for rep in range(int(cfg.first_rep), int(cfg.first_rep) + int(cfg.reps)):
        seed = int(cfg.seed) + rep
        got = {arm: reuse[rep] if arm == "fixed" and rep in reuse else population(cfg, arm, rep, seed, runs)
               for arm in order(rep)}
        if rep in reuse:
            n, same = agreement(got["pbt"], got["fixed"])
            got["pbt"].update(same_epochs=n, same_as_fixed=int(same))
            print(f"repetition {rep} fixed: reused from {reuse[rep]['reused_from']}; the PBT arm's members "
                  f"{'equal' if same else 'DIFFER FROM'} it over {n} member-epochs before its first change",
                  flush=True)
        reps.append(got)
        reps.sort(key=lambda r: r["pbt"]["rep"])
        write_tables(cfg, reps, res)
    if not cfg.reps:
        write_tables(cfg, reps, res)
    checks = report(cfg, reps, cost_check(*cost), time.time() - t0, res)
    plot(cfg, reps, res)
    return checks


@hydra.main(config_path=".", config_name="run", version_base=None)
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    main()
