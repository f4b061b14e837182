"""``pbt.objective=<info key>``: members record the key (``train.info_key``) and the controller ranks them by it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gmitest import FAST, run_cli

from gmiexp.pbt.state import STATE_FILE
from gmiexp.status import read_history

EPOCH_FRAMES = 32 * 16  # FAST: 32 environments x horizon 16, one GMI
#: episodes of 8 steps: some environment hits the time limit at most steps, so ``time_outs`` moves
POPULATION = [*FAST, "task.max_episode_length=8", "num_gpus=1", "gmis_per_gpu=1", "max_iterations=2", "pbt=default",
              "pbt.population=3", f"pbt.interval_steps={EPOCH_FRAMES}", "pbt.objective=time_outs"]


@pytest.mark.timeout(600)  # three members of two epochs: about 25 s on a 2-core host
def test_members_are_ranked_by_the_info_key_their_histories_record(tmp_path: Path) -> None:
    r = run_cli(*POPULATION, f"hydra.run.dir={tmp_path}", timeout=550)
    assert r.returncode == 0, r.stderr[-3000:]
    events = [json.loads(line) for line in (tmp_path / STATE_FILE).read_text().splitlines()]
    runs = {e["member"]: Path(e["run_dir"]) for e in events if e["event"] == "start" and e["life"] == 0}
    records = [e for e in events if e["event"] == "record"]
    assert {(e["member"], e["interval"]) for e in records} == {(m, k) for m in range(3) for k in (1, 2)}
    for e in records:
        row = next(h for h in read_history(runs[e["member"]]) if h["iteration"] == e["epoch"])
        assert e["objective"] == row["info/time_outs"] != row["reward/mean"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["best"]["objective"] == max(m["objective"] for m in summary["members"])
