"""A re-shaping run's loop: launch a partition, and after each re-shape plan the next one and launch it again.

:mod:`gmiexp.launch.elastic` decides when and where to (requests, the online explorer); this module carries a
decision out: the new partition (a typed :class:`~gmiexp.planner.partition.Partition`) planned by the planner's
``replan`` with the global batch pinned, resumed from GMI 0's checkpoint, rolled back when the host cannot realise
it, the old partition's files kept under ``segments/<k>/``, and the run's summary over every partition.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gmiexp.errors import ConfigError, Interrupted, LaunchError
from gmiexp.launch import requeue
from gmiexp.launch.elastic import Decision, Reshaped, Reshaper
from gmiexp.launch.launcher import launch
from gmiexp.launch.summary import resumed, write_summary
from gmiexp.planner.partition import Partition, gmis_per_gpu
from gmiexp.stats import steady_rate

if TYPE_CHECKING:
    from gmiexp.plan.model import Plan
    from gmiexp.planner.build import Replan


def run_segments(plan: Plan, backend: Any, node_dir: Path, live: Any, reshaper: Reshaper,
                 replan: Replan) -> dict[str, Any]:
    """Launch ``plan``; after every re-shape, plan the new partition and launch it from GMI 0's checkpoint.

    ``replan``: the planner's (``gmiexp.planner.build.replanner``), asked for each new partition of the plan.
    Returns the run's summary: the last partition's figures, every partition's rows in ``history``, the first
    attempt's ``resumed``, the whole run's ``wall_s`` and every re-shape in ``reshapes``.
    """
    t_start, first = time.time(), plan
    current = Partition(gmis_per_gpu(plan))  # the partition running now (None fields: as the run started)
    boundaries: list[int] = []  # index of each later partition's first row in the run's rows

    def whole(summary: dict[str, Any]) -> dict[str, Any]:
        rows = live.all_rows
        _complete(reshaper.records, rows, boundaries, live.rows.t0)
        summary.update(resumed=resumed(first), wall_s=time.time() - t_start, started_at=t_start,
                       reshapes=reshaper.records, history=rows)
        if rows:
            summary["metrics"].update({k: v for k, v in rows[-1].items() if k in ("frames", "iteration")})
        write_summary(node_dir / "summary.json", summary)
        return summary

    while True:
        try:
            summary = launch(plan, backend, node_dir, live=live, reshaper=reshaper)
            break
        except Interrupted as e:  # Ctrl-C: what every partition trained, as a run that never re-shaped keeps it
            if e.summary is not None:
                e.summary = whole(e.summary)
            raise
        except Reshaped as r:
            t_exit = time.time()
            reshaper.segment_ended(r.summary)  # the episodes the re-shape that started it cut (its resume report)
            current, plan, backend, timing = _next_partition(replan, current, plan, r.decision, node_dir)
            r.decision.epoch = int(plan.resumed.get("epoch", r.decision.epoch))  # where the GMIs stopped
            live.next_segment(plan)
            rows_before = live.all_rows
            _archive(node_dir, len(boundaries))
            boundaries.append(len(live.all_rows))
            reshaper.done(r.decision, stop_s=round(t_exit - r.decision.decided_at, 3),
                          plan_s=round(time.time() - t_exit, 3), started_at=time.time(), **timing)
            reshaper.segment_started(gmis_per_gpu(plan), float(rows_before[-1]["wall_s"]) if rows_before else None)
    reshaper.segment_ended(summary)
    return whole(summary)


def _next_partition(replan: Replan, current: Partition, plan: Plan, d: Decision,
                    node_dir: Path) -> tuple[Partition, Plan, Any, dict[str, Any]]:
    """The partition, plan and backend of ``d.to`` (and its slice), resuming from GMI 0's checkpoint.

    A partition the host cannot realise (a ConfigError while planning it) rolls back to the previous one.
    """

    def build(target: Partition) -> tuple[Partition, Plan, Any]:
        new, be = replan(plan, target)
        requeue.resume(new, node_dir, "auto")  # this run's own checkpoint, whatever launch.resume says
        if not new.checkpoint:
            raise LaunchError(f"re-shape to gmis_per_gpu={target.gmis_per_gpu} failed: GMI 0 wrote no checkpoint in "
                              f"{node_dir}")
        return target, new, be

    try:
        return (*build(current.moved(d.to, d.overrides)), {"rolled_back": False})
    except ConfigError as e:  # the new partition cannot be realised here: go on as before
        why = str(e).splitlines()[0]
        print(f"gmiexp: re-shape to gmis_per_gpu={d.to} failed ({why}); going on with gmis_per_gpu={d.frm}",
              file=sys.stderr, flush=True)
        d.to, d.overrides = d.frm, {}
        return (*build(current.moved(d.frm)), {"rolled_back": True, "why": why})


def _archive(node_dir: Path, k: int) -> None:
    """Keep a finished partition's per-GMI files (``gmis/``, ``logs/``) under ``segments/<k>/``."""
    import shutil

    dest = node_dir / "segments" / str(k)
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("gmis", "logs"):
        if (node_dir / name).exists():
            shutil.move(str(node_dir / name), str(dest / name))


def _complete(records: list[dict[str, Any]], rows: list[dict[str, Any]], boundaries: list[int], t0: float) -> None:
    """Each re-shape's rate after and cost, from the rows: the gap between the partitions' epochs beyond one epoch.

    A move without a restart (``live``) starts no partition: it has its own cost and no boundary.
    """
    restarts = [r for r in records if not r.get("live")]
    for i, (rec, b) in enumerate(zip(restarts, boundaries, strict=False)):
        end = boundaries[i + 1] if i + 1 < len(boundaries) else len(rows)
        seg = rows[b:end]
        if not seg or b == 0:
            continue
        epochs = [float(seg[j + 1]["wall_s"]) - float(seg[j]["wall_s"]) for j in range(1, len(seg) - 1)]
        epoch_s = sorted(epochs)[len(epochs) // 2] if epochs else None
        rec["rate_after"] = steady_rate(seg, skip=2) or None  # the restart's epoch and the next left out
        rec["first_epoch_s"] = round(t0 + float(seg[0]["wall_s"]) - float(rec["started_at"]), 3)
        gap = float(seg[0]["wall_s"]) - float(rows[b - 1]["wall_s"])
        rec["cost_s"] = round(gap - epoch_s, 3) if epoch_s is not None else round(gap, 3)
        rec["epoch_s"] = epoch_s
