"""The packed sweep's table: per member overrides, status, wall time, env steps/s, reward; the makespan.

Written as ``pack.json`` and ``pack.csv`` in the multirun directory and printed on stderr;
``python -m gmiexp.tools.report`` adds it to its report (:func:`markdown`). A sweeper that launches in
batches (Optuna's) calls the launcher once per batch: each batch's rows join the earlier ones.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from gmiexp.pack.runner import Job

PACK_JSON, PACK_CSV = "pack.json", "pack.csv"
COLUMNS = ("job", "overrides", "slot", "status", "wall_s", "env_steps_per_s", "reward", "run_dir")


def slices(job: Job) -> str:
    """The member's slots over time: its first, then each it grew into (recycle), seconds after its start."""
    if job.slot is None:
        return ""
    grown = [f"+{s.name}@{t - (job.start or t):.0f}s" for t, s in job.grown]
    return " ".join([job.slot.name, *grown])


def row(job: Job) -> dict[str, Any]:
    summary = job.summary()
    metrics = summary.get("metrics", {})
    return {"job": job.num, "overrides": " ".join(job.overrides), "slot": slices(job),
            "status": job.status, "exit_code": job.returncode,
            "wall_s": None if job.wall_s is None else round(job.wall_s, 2),
            "env_steps_per_s": metrics.get("perf/env_steps_per_s"), "reward": metrics.get("reward/mean"),
            "run_dir": str(job.run_dir), "started_at": job.start, "finished_at": job.end,
            "reshapes": len(summary.get("reshapes", []) or [])}


def makespan(rows: list[dict[str, Any]]) -> float | None:
    starts = [r["started_at"] for r in rows if r.get("started_at") is not None]
    ends = [r["finished_at"] for r in rows if r.get("finished_at") is not None]
    return round(max(ends) - min(starts), 2) if starts and ends else None


def load(sweep_dir: Path) -> dict[str, Any] | None:
    """The table an earlier batch of this sweep wrote, if any."""
    try:
        return json.loads((sweep_dir / PACK_JSON).read_text())
    except (OSError, ValueError):
        return None


def build(jobs: list[Job], jobs_per_gpu: int, gpus: list[int], auto: dict[str, Any] | None,
          earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """The table of ``jobs`` after the rows of an ``earlier`` batch (other job numbers only)."""
    nums = {j.num for j in jobs}
    rows = [r for r in (earlier or {}).get("members", []) if r["job"] not in nums] + [row(j) for j in jobs]
    rates = [r["env_steps_per_s"] for r in rows if r["status"] == "ok" and r["env_steps_per_s"]]
    return {"jobs_per_gpu": jobs_per_gpu, "gpus": gpus, "makespan_s": makespan(rows),
            "env_steps_per_s_total": round(sum(rates), 1), "failed": [r["run_dir"] for r in rows
                                                                    if r["status"] != "ok"],
            "auto": auto, "members": rows}


def write(table: dict[str, Any], sweep_dir: Path) -> None:
    (sweep_dir / PACK_JSON).write_text(json.dumps(table, indent=2))
    with (sweep_dir / PACK_CSV).open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table["members"][0]) if table["members"] else list(COLUMNS))
        w.writeheader()
        w.writerows(table["members"])


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"
    return str(v)


def varying(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Each member's overrides that not every member shares, and the shared ones (keeps the text table narrow)."""
    split = [r["overrides"].split() for r in rows]
    common = [o for o in split[0] if all(o in s for s in split)] if split else []
    return [" ".join(o for o in s if o not in common) or "-" for s in split], common


def text(table: dict[str, Any]) -> str:
    """The table as aligned text (stderr); overrides every member shares are listed once, below it."""
    cols = [c for c in COLUMNS if c != "run_dir"]
    own, common = varying(table["members"])
    cells = [[fmt(r[c]) if c != "overrides" else o for c in cols] for r, o in zip(table["members"], own, strict=True)]
    widths = [max(len(c), *(len(x[i]) for x in cells)) if cells else len(c) for i, c in enumerate(cols)]
    line = lambda xs: "  ".join(x.ljust(w) for x, w in zip(xs, widths, strict=True))  # noqa: E731
    out = [line(cols), *map(line, cells)]
    if common and len(table["members"]) > 1:
        out.append(f"every member: {' '.join(common)}")
    out.append(f"makespan {fmt(table['makespan_s'])} s, jobs_per_gpu={table['jobs_per_gpu']} on GPUs "
               f"{table['gpus']}, {fmt(table['env_steps_per_s_total'])} env steps/s summed over finished members")
    return "\n".join(out)


def markdown(root: Path) -> str:
    """A report section for the packed sweep under ``root`` ('' when it was not packed)."""
    path = root / PACK_JSON
    if not path.is_file():
        return ""
    table = json.loads(path.read_text())
    cols = [c for c in COLUMNS if c != "run_dir"]
    lines = ["## Packed sweep", "", f"jobs_per_gpu={table['jobs_per_gpu']} on GPUs {table['gpus']}; "
             f"makespan {fmt(table['makespan_s'])} s.", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in table["members"]]
    return "\n".join([*lines, ""])
