"""The GMI status files: a history read while its GMI appends to it."""

from __future__ import annotations

import json
from pathlib import Path

from gmiexp.status import StatusWriter, read_history, read_jsonl


def test_a_row_the_gmi_is_still_writing_is_left_for_the_next_read(tmp_path: Path) -> None:
    """Seen in a population's controller: a read mid-append raised JSONDecodeError and stopped every member."""
    StatusWriter(tmp_path, 0).history({"iteration": 1, "frames": 1024})
    path = tmp_path / "gmis" / "0" / "history.jsonl"
    row = json.dumps({"iteration": 2, "frames": 2048, "reward/mean": 12.5})
    with path.open("a") as f:
        f.write(row[:20])  # the first part of the next row, flushed before the rest
    assert read_history(tmp_path, 0) == [{"iteration": 1, "frames": 1024}]
    with path.open("a") as f:
        f.write(row[20:] + "\n")
    assert [r["iteration"] for r in read_history(tmp_path, 0)] == [1, 2]
    assert read_history(tmp_path, 7) == []  # no history yet


def test_a_line_a_kill_cut_short_is_skipped_and_the_records_after_it_read(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"b": ' + '{"c": 3}\n')  # a record cut by a kill, the next one written after it
    assert read_jsonl(path) == [{"a": 1}]  # the joined line does not parse: skipped
    with path.open("a") as f:
        f.write('{"d": 4}\n')
    assert read_jsonl(path) == [{"a": 1}, {"d": 4}]
    assert read_jsonl(tmp_path / "none.jsonl") == []
