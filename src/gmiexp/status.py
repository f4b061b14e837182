"""Per-GMI status files: heartbeat, progress and final result, shared through the run directory.

Files (not shared memory) because they survive a crashed worker, are
written atomically (write + rename), and the launcher can read them
without any handshake: ``<run_dir>/gmis/<id>/status.json`` and
``result.json``, and rank 0's ``history.jsonl``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def gmi_dir(run_dir: str | Path, gmi_id: int) -> Path:
    return Path(run_dir) / "gmis" / str(gmi_id)


STATUS_FILES = ("status.json", "result.json", "history.jsonl")


def reset(run_dir: str | Path) -> None:
    """Remove a previous run's status files from ``run_dir`` (a reused ``hydra.run.dir``).

    History is appended to, so a second run in the same directory would otherwise mix its epochs
    with the first run's and corrupt every rate in its summary.
    """
    for path in (Path(run_dir) / "gmis").glob("*/*"):
        if path.name in STATUS_FILES:
            path.unlink(missing_ok=True)


def _atomic_write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def gmi_pids(run_dir: str | Path, gmis: int | Iterable[int]) -> dict[int, int]:
    """GMI id -> process id of every GMI (``gmis``: their ids, or a count from 0) that has written its status."""
    out = {}
    for g in range(gmis) if isinstance(gmis, int) else gmis:
        s = read_json(gmi_dir(run_dir, g) / "status.json")
        if s and s.get("pid"):
            out[g] = int(s["pid"])
    return out


class StatusWriter:
    """Written by a GMI from its main loop; a GMI stuck anywhere stops beating."""

    def __init__(self, run_dir: str | Path, gmi_id: int, min_interval_s: float = 0.5) -> None:
        self.dir = gmi_dir(run_dir, gmi_id)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.gmi_id = gmi_id
        self.min_interval_s = min_interval_s
        self.fields: dict[str, Any] = {"gmi": gmi_id, "pid": os.getpid(), "stage": "starting",
                                       "iteration": 0, "frames": 0}
        self._last = 0.0
        self.beat(force=True)

    def beat(self, force: bool = False, **fields: Any) -> None:
        """Record liveness (and optional progress fields); throttled unless ``force``."""
        self.fields.update(fields)
        now = time.time()
        if not force and now - self._last < self.min_interval_s:
            return
        self._last = now
        self.fields["time"] = now
        _atomic_write(self.dir / "status.json", self.fields)

    def history(self, row: dict[str, Any]) -> None:
        append_jsonl(self.dir / "history.jsonl", row)

    def result(self, metrics: dict[str, Any]) -> None:
        _atomic_write(self.dir / "result.json", metrics)
        self.beat(force=True, stage="done")


def read_status(run_dir: str | Path, gmi_id: int) -> dict[str, Any] | None:
    return read_json(gmi_dir(run_dir, gmi_id) / "status.json")


def read_result(run_dir: str | Path, gmi_id: int) -> dict[str, Any] | None:
    return read_json(gmi_dir(run_dir, gmi_id) / "result.json")


def append_jsonl(path: Path, record: dict[str, Any], *, default: Any = None) -> None:
    """Append one record as one line, the writer's half of :func:`read_jsonl`.

    After a line a kill cut short (the file not ending in a newline) the record starts a fresh line, so only the cut
    line is lost, not the first record written after it (a resumed run's or a restarted controller's).
    """
    line = (json.dumps(record, default=default) + "\n").encode()
    with open(path, "ab+") as f:
        end = f.seek(0, os.SEEK_END)
        if end:
            f.seek(end - 1)
            if f.read(1) != b"\n":
                line = b"\n" + line
        f.write(line)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file another process appends to: every whole line ([] without the file).

    A record is whole once its newline is written: the part of one not yet flushed is left for the next read, and
    a line a kill cut short (the next record then written after it) is skipped.
    """
    try:
        whole = path.read_text().rpartition("\n")[0]
    except FileNotFoundError:
        return []
    out = []
    for line in whole.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def read_history(run_dir: str | Path, gmi_id: int = 0) -> list[dict[str, Any]]:
    """The GMI's epochs so far (:func:`read_jsonl`: the population controller reads it while the GMI appends)."""
    return read_jsonl(gmi_dir(run_dir, gmi_id) / "history.jsonl")
