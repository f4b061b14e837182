"""What a population did, read back from ``<run>/pbt/state.jsonl``: each member's curve, the lineage, TensorBoard.

The controller writes every event of a population to one file (:data:`gmiexp.pbt.state.STATE_FILE`); everything a
user looks at is derived from it afterwards, so a stopped or failed population shows as far as it went:

* :func:`curves`: each member's objective against frames along its lineage. A restart exploit starts the member's
  next life from its source's frames; what the earlier life trained past them was thrown away and is not drawn.
* :func:`lineage`: one row per exploit: who copied whom, at which interval and frames, which values changed.
* :func:`write_tensorboard`: per member an event file under ``<run>/pbt/tensorboard/<member>/`` with Isaac Lab's
  ``pbt/*`` keys (its PBT observer writes ``pbt/<param>`` and ``pbt/00_best_objective``; gmiexp at every
  interval, with the member's own objective as ``pbt/objective``), so TensorBoard overlays the members.
* :func:`markdown`: the population's section of ``python -m gmiexp.tools.report <run>`` (tables and a figure).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gmiexp.pbt.state import STATE_FILE, events, is_copy, is_population  # the log's one reader, beside replay

TB_DIR = Path("pbt") / "tensorboard"
BEST_OBJECTIVE = "pbt/00_best_objective"  # Isaac Lab's key: the population's best objective at the interval


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def curves(evs: Sequence[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Per member the points along its lineage (``frames``, ``objective``, ``life``, ``values``, ``copied``).

    A copy shows as a jump: a point at the frames where the member took its source's state, holding the source's
    objective (``copied``: the source member). In place, the member goes on in the same life with the new values
    from there. After a restart exploit its earlier life's records past the frames the next life started from are
    dropped: that training was thrown away.
    """
    starts: dict[tuple[int, int], dict[str, Any]] = {}
    by_life: dict[tuple[int, int], list[dict[str, Any]]] = {}
    copied: dict[tuple[int, int], dict[str, Any]] = {}  # (member, life) -> the restart exploit that started it
    rows = lineage(evs)
    queue: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        if not row["in_place"]:
            queue.setdefault(row["member"], []).append(row)
    for e in evs:
        if e.get("event") == "start":
            starts[(e["member"], e["life"])] = e
            if is_copy(e) and queue.get(e["member"]):  # a resume or restart from its own checkpoint copies none
                copied[(e["member"], e["life"])] = queue[e["member"]].pop(0)
        elif e.get("event") == "record" and _finite(e.get("objective")):
            by_life.setdefault((e["member"], e.get("life", 0)), []).append(e)

    def point(frames: Any, objective: float, interval: Any, life: int, values: dict, source: int | None) -> dict:
        return {"frames": int(frames), "objective": objective, "interval": interval, "life": life,
                "values": values, "copied": source}

    out: dict[int, list[dict[str, Any]]] = {}
    for (member, life), start in sorted(starts.items()):
        nxt = starts.get((member, life + 1))
        cut = int(nxt["frames"]) if nxt is not None else None
        values = start.get("values", {})
        points = out.setdefault(member, [])
        row = copied.get((member, life))
        if row is not None and row["source_objective"] is not None:
            points.append(point(start["frames"], row["source_objective"], row["interval"], life, values, row["source"]))
        for r in by_life.get((member, life), []):
            if cut is None or int(r["frames"]) <= cut:
                points.append(point(r["frames"], float(r["objective"]), r.get("interval"), life, values, None))
    for member, points in out.items():
        points.sort(key=lambda r: (r["frames"], r["life"], r["copied"] is None))
        for row in (r for r in rows if r["in_place"] and r["member"] == member):  # in the order taken
            at = int(row["at_frames"])
            life = max((p["life"] for p in points if p["frames"] <= at), default=0)
            keep = [p for p in points if p["frames"] <= at]
            later = [{**p, "values": row["values"]} for p in points if p["frames"] > at]
            jump = [point(at, row["source_objective"], row["interval"], life, row["values"], row["source"])] \
                if row["source_objective"] is not None else []
            points[:] = keep + jump + later
    return {m: p for m, p in out.items() if p}


def changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The values an exploit changed: ``key -> (before, after)``."""
    return {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}


def lineage(evs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per exploit taken: member, interval, frames, source, where it took it, what changed.

    A restart exploit is taken when decided (the member's next life starts from its source's frames); one in place
    when the member acknowledged it (its ``exploited`` event, at the member's own frames), else it is not a row.
    """
    taken = {(e["member"], e.get("id")): e for e in evs if e.get("event") == "exploited" and "values" in e}
    rows = []
    seen: dict[tuple[int, Any], float] = {}  # (member, interval) -> its latest objective there
    for e in evs:
        if e.get("event") == "record" and _finite(e.get("objective")):
            seen[(e["member"], e.get("interval"))] = float(e["objective"])
        if e.get("event") != "decision" or "values" not in e:
            continue  # a decision that kept the member copies nothing
        in_place = e.get("exploit") == "inplace"
        ack = taken.get((e["member"], e.get("id"))) if in_place else None
        if in_place and ack is None:
            continue  # sent, but the member ended (or failed to load it) before taking it
        rows.append({"member": e["member"], "interval": e.get("interval"), "frames": e.get("frames"),
                     "objective": seen.get((e["member"], e.get("interval"))),
                     "source": e.get("source"), "source_frames": e.get("source_frames"),
                     "source_objective": seen.get((e.get("source"), e.get("source_interval"))),
                     "in_place": in_place, "at_frames": ack["frames"] if ack else e.get("source_frames"),
                     "seconds": ack.get("seconds") if ack else None, "values": e["values"],
                     "reason": e.get("reason"), "changed": changed(e.get("values_before") or {}, e["values"])})
    return rows


def interruptions(evs: Sequence[dict[str, Any]]) -> list[str]:
    """The population's stops, resumes and failed members, in the order they happened, one line each."""
    out = []
    for e in evs:
        kind = e.get("event")
        if kind == "stopped":
            out.append(f"stopped ({e.get('reason', '?')})")
        elif kind == "resumed":
            at = sorted((e.get("frames") or {}).items(), key=lambda x: int(x[0]))
            goes = ", ".join(f"member {m} from {f} frames" for m, f in at)
            out.append(f"resumed (segment {e.get('segment')}): {goes}")
        elif kind == "failed":
            out.append(f"member {e.get('member')} life {e.get('life')} failed (exit {e.get('code')}): "
                       f"{e.get('run_dir')}; {e.get('then', '')}")
    return out


def best_by_interval(evs: Sequence[dict[str, Any]]) -> dict[int, float]:
    """The population's best objective at each interval (over every member's record of it)."""
    best: dict[int, float] = {}
    for rows in curves(evs).values():
        for r in rows:
            i = r["interval"]
            if i is not None:
                best[i] = max(best.get(i, -math.inf), r["objective"])
    return best


def write_tensorboard(run_dir: Path) -> Path:
    """``pbt/objective``, ``pbt/00_best_objective`` and ``pbt/<key>`` per member, against frames."""
    from torch.utils.tensorboard import SummaryWriter

    evs = events(run_dir)
    best = best_by_interval(evs)
    root = run_dir / TB_DIR
    for member, rows in curves(evs).items():
        writer = SummaryWriter(log_dir=str(root / str(member)))
        try:
            for r in rows:
                writer.add_scalar("pbt/objective", r["objective"], r["frames"])
                if r["interval"] in best:
                    writer.add_scalar(BEST_OBJECTIVE, best[r["interval"]], r["frames"])
                for key, value in r["values"].items():
                    if _finite(value):
                        writer.add_scalar(f"pbt/{key}", value, r["frames"])
        finally:
            writer.close()
    return root


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def members_table(run_dir: Path, evs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per member: its lives, exploits taken, last objective and frames, and the values it ended with."""
    cur = curves(evs)
    lives: dict[int, int] = {}
    values: dict[int, dict[str, Any]] = {}
    for e in evs:
        if e.get("event") == "start":
            lives[e["member"]] = max(lives.get(e["member"], 0), int(e["life"]) + 1)
            values[e["member"]] = e.get("values", {})
        elif e.get("event") == "exploited" and "values" in e:  # an in-place exploit: the same life, new values
            values[e["member"]] = e["values"]
    taken: dict[int, int] = {}
    for row in lineage(evs):
        taken[row["member"]] = taken.get(row["member"], 0) + 1
    return [{"member": m, "lives": lives[m], "exploits": taken.get(m, 0),
             "frames": cur[m][-1]["frames"] if cur.get(m) else None,
             "objective": cur[m][-1]["objective"] if cur.get(m) else None, "values": values.get(m, {})}
            for m in sorted(lives)]


def plot(run_dir: Path, out: Path) -> Path | None:
    """Each member's objective against frames; a marker where it copied another member."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evs = events(run_dir)
    cur = curves(evs)
    if not cur:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for member, rows in sorted(cur.items()):
        line, = ax.plot([r["frames"] for r in rows], [r["objective"] for r in rows], label=f"member {member}")
        jumps = [r for r in rows if r["copied"] is not None]
        ax.plot([r["frames"] for r in jumps], [r["objective"] for r in jumps], "o", color=line.get_color())
    ax.set_xlabel("frames")
    ax.set_ylabel("objective (run-wide return)")
    ax.set_title("population: each member along its lineage (o: copied a leader)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    path = out / "pbt.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown(run_dir: Path, out: Path) -> str:
    """The population's report section ("" when ``run_dir`` is not a population's)."""
    if not is_population(run_dir):
        return ""
    evs = events(run_dir)
    head = next((e for e in evs if e.get("event") == "population"), {})
    end = next((e for e in reversed(evs) if e.get("event") in ("finished", "stopped")), None)
    lines = ["## Population", "",
             f"{head.get('population', '?')} members, rule {head.get('rule', '?')}, exploit "
             f"{head.get('exploit', '?')}, every {head.get('epochs_per_interval', '?')} epochs; "
             + (f"ended: {end['event']}" + (f" (best member {end['best']['member']}, "
                                             f"{end['best']['checkpoint']})" if end.get("best") else "")
                if end else "still running or killed") + f". Lineage: `{run_dir / STATE_FILE}`.", "",
             "| member | lives | exploits | frames | last objective | values |", "|---|---|---|---|---|---|"]
    for r in members_table(run_dir, evs):
        vals = ", ".join(f"{k.split('.')[-1]}={_fmt(v)}" for k, v in r["values"].items())
        lines.append(f"| {r['member']} | {r['lives']} | {r['exploits']} | {_fmt(r['frames'])} | "
                     f"{_fmt(r['objective'])} | {vals} |")
    rows = lineage(evs)
    lines += ["", f"### Lineage: {len(rows)} exploits", ""]
    if rows:
        lines += ["| member | interval | frames | copied | its frames | how | changed |",
                  "|---|---|---|---|---|---|---|"]
        for r in rows:
            ch = ", ".join(f"{k.split('.')[-1]} {_fmt(a)} -> {_fmt(b)}" for k, (a, b) in r["changed"].items())
            how = f"in place at {r['at_frames']}" if r["in_place"] else \
                "replaced (it failed)" if r["reason"] == "failed" else "restart"
            lines.append(f"| {r['member']} | {r['interval']} | {r['frames']} | member {r['source']} | "
                         f"{r['source_frames']} | {how} | {ch or 'nothing'} |")
    stops = interruptions(evs)
    if stops:
        lines += ["", f"### Stops, resumes and failures: {len(stops)}", "", *(f"* {x}" for x in stops)]
    png = plot(run_dir, out)
    if png is not None:
        lines += ["", f"![population]({png.name})"]
    return "\n".join(lines) + "\n"


def wandb_group(group: str | None, run_dir: Path) -> str:
    """The W&B group of a population: the user's ``logger.group``, else ``pbt-<run dir name>`` (one per population)."""
    return group or f"pbt-{run_dir.name}"


def log_wandb(run_dir: Path, project: str, entity: str | None, mode: str, group: str) -> None:
    """One W&B run for the population itself (``job_type=pbt``) beside its members' runs in ``group``.

    It holds the lineage and the members as tables, every member's objective against frames (``member/<m>``) and
    the population's best; the members' own runs (one per life, written by their launchers) carry the training.
    """
    import os

    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    evs = events(run_dir)
    run = wandb.init(project=project, entity=entity, mode=mode, group=group, job_type="pbt",
                     name=f"{run_dir.name}/population", dir=str(run_dir / "pbt"), reinit="finish_previous",
                     settings=wandb.Settings(console="off", silent=True, x_disable_stats=True))
    try:
        run.define_metric("frames")
        run.define_metric("member/*", step_metric="frames")
        for member, points in sorted(curves(evs).items()):
            for p in points:
                run.log({"frames": p["frames"], f"member/{member}": p["objective"]})
        cols = ["member", "interval", "frames", "source", "source_frames", "objective", "source_objective",
                "in_place", "at_frames", "changed"]
        run.log({"lineage": wandb.Table(columns=cols, data=[
            [r["member"], r["interval"], r["frames"], r["source"], r["source_frames"], r["objective"],
             r["source_objective"], r["in_place"], r["at_frames"], json.dumps(r["changed"], default=str)]
            for r in lineage(evs)])})
        table = members_table(run_dir, evs)
        run.log({"members": wandb.Table(columns=["member", "lives", "exploits", "frames", "objective", "values"],
                                        data=[[r["member"], r["lives"], r["exploits"], r["frames"], r["objective"],
                                               json.dumps(r["values"], default=str)] for r in table])})
        scored = [r["objective"] for r in table if _finite(r["objective"])]
        run.summary.update({"exploits": len(lineage(evs)), **({"best_objective": max(scored)} if scored else {})})
    finally:
        run.finish()
