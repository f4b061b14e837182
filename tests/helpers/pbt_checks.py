"""What every in-place population test checks, whatever the members' trainer (rl-games or rsl_rl)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gmiexp.pbt.state import STATE_FILE
from gmiexp.rl import exploit
from gmiexp.status import gmi_pids


def events(run_dir: Path) -> list[dict]:
    """The population's log, ``<run>/pbt/state.jsonl``."""
    return [json.loads(line) for line in (run_dir / STATE_FILE).read_text().splitlines()]


def exploits_in_place(ev: list[dict], members: int, intervals: int, epoch_frames: int,
                      ) -> list[tuple[dict[str, Any], dict[str, Any], Path]]:
    """Check the population's in-place exploits; each one's (decision, exploited event, member's life dir).

    Every member posted every interval and started once; at least one decision copied a leader; each was taken by
    the member's own GMI (the pid it ran with from start to end) from the bytes its source published at that very
    interval, at the boundary decided on (no frame lost), with the decided values.
    """
    assert {(e["member"], e["interval"]) for e in ev if e["event"] == "record"} == {
        (m, k) for m in range(members) for k in range(1, intervals + 1)}
    starts = [e for e in ev if e["event"] == "start"]
    assert sorted(e["member"] for e in starts) == list(range(members))  # no member started twice
    decisions = [e for e in ev if e["event"] == "decision" and e.get("copies")]
    taken = {e["id"]: e for e in ev if e["event"] == "exploited"}
    assert decisions, [e for e in ev if e["event"] == "record"]  # threshold 0: those below the mean copy
    out = []
    for d in decisions:
        m, life = d["member"], Path(starts[d["member"]]["run_dir"])
        t = taken[d["id"]]
        assert t["member"] == m and t["source"] == d["source"] and t["interval"] == d["source_interval"]
        source_dir = Path(starts[d["source"]]["run_dir"])
        (pub,) = [p for p in exploit.published_records(source_dir) if p["interval"] == d["source_interval"]]
        assert t["sha256"] == pub["sha256"] and t["segment"] == pub["segment"]
        assert t["pid"] == gmi_pids(life, [0])[0]
        assert t["frames"] == d["frames"] == d["interval"] * epoch_frames and t["frames_lost"] == 0
        assert t["values"] == d["values"]
        out.append((d, t, life))
    return out
