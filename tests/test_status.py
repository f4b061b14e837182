"""The GMI status files and the appended logs: read while their writer appends, written again after a kill."""

from __future__ import annotations

import json
from pathlib import Path

from gmiexp.status import StatusWriter, append_jsonl, read_history, read_jsonl


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


def test_a_record_written_after_a_cut_line_starts_a_fresh_one_so_only_the_cut_record_is_lost(tmp_path: Path) -> None:
    """A resumed GMI's first row (or a restarted controller's first event) was joined to the cut line and lost."""
    StatusWriter(tmp_path, 0).history({"iteration": 1})
    path = tmp_path / "gmis" / "0" / "history.jsonl"
    with path.open("a") as f:
        f.write('{"iteration": 2, "fra')  # the GMI killed in the middle of its row
    StatusWriter(tmp_path, 0).history({"iteration": 2})  # the resumed run trains epoch 2 again
    StatusWriter(tmp_path, 0).history({"iteration": 3})
    assert [r["iteration"] for r in read_history(tmp_path, 0)] == [1, 2, 3]
    log = tmp_path / "log.jsonl"
    append_jsonl(log, {"path": tmp_path}, default=str)  # an empty file gains no blank line first
    assert log.read_text() == json.dumps({"path": str(tmp_path)}) + "\n"
