"""The packed sweep's table and the report's section built from it."""

from __future__ import annotations

import json
from pathlib import Path

from gmiexp.pack import table
from gmiexp.pack.runner import Job
from gmiexp.pack.slots import Slot
from gmiexp.tools import report


def job(root: Path, num: int, start: float, end: float, status: str = "ok", rate: float = 1000.0) -> Job:
    d = root / str(num)
    d.mkdir(parents=True)
    s = {"status": status, "wall_s": end - start, "config": {"seed": num, "gmis_per_gpu": 1},
         "metrics": {"perf/env_steps_per_s": rate, "reward/mean": 20.0 + num, "mem/peak_rss_mb": 300.0},
         "history": []}
    (d / "summary.json").write_text(json.dumps(s))
    return Job(num=num, overrides=[f"seed={num}"], run_dir=d, slot=Slot(0, num % 2), start=start, end=end,
               returncode=0 if status == "ok" else 1, status=status)


def test_table_has_every_member_and_the_makespan(tmp_path: Path) -> None:
    jobs = [job(tmp_path, 0, 100.0, 110.0), job(tmp_path, 1, 100.5, 112.0), job(tmp_path, 2, 110.0, 125.0, "failed")]
    t = table.build(jobs, 2, [0], None)
    assert t["makespan_s"] == 25.0
    assert t["env_steps_per_s_total"] == 2000.0  # finished members only
    assert t["failed"] == [str(tmp_path / "2")]
    assert [(m["overrides"], m["slot"], m["status"], m["wall_s"], m["reward"]) for m in t["members"]] == [
        ("seed=0", "gpu0/0", "ok", 10.0, 20.0), ("seed=1", "gpu0/1", "ok", 11.5, 21.0),
        ("seed=2", "gpu0/0", "failed", 15.0, 22.0)]
    table.write(t, tmp_path)
    assert json.loads((tmp_path / "pack.json").read_text()) == t
    assert (tmp_path / "pack.csv").read_text().splitlines()[0].startswith("job,overrides,slot,status")
    assert "makespan 25.00 s" in table.text(t)


def test_report_reads_the_pack_table(tmp_path: Path) -> None:
    jobs = [job(tmp_path, 0, 0.0, 10.0), job(tmp_path, 1, 0.0, 12.0)]
    table.write(table.build(jobs, 2, [0], None), tmp_path)
    md = report.build(tmp_path, tmp_path / "report", {}, use_wandb=False).read_text()
    assert "## Packed sweep" in md and "makespan 12.00 s" in md and "| 1 | seed=1 | gpu0/1 | ok |" in md


def test_a_later_batch_joins_the_earlier_batches_rows(tmp_path: Path) -> None:
    table.write(table.build([job(tmp_path, 0, 0.0, 10.0), job(tmp_path, 1, 0.0, 12.0)], 2, [0], None), tmp_path)
    t = table.build([job(tmp_path, 2, 20.0, 30.0)], 2, [0], None, table.load(tmp_path))
    assert [m["job"] for m in t["members"]] == [0, 1, 2]
    assert t["makespan_s"] == 30.0
