"""The controller's side of an in-place exploit, without member processes: which published states it keeps, the
verdicts it posts and what an acknowledgement changes (the members' side is gmiexp.rl.exploit's, end to end in
test_controller_inplace.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gmiexp.pack.runner import Job
from gmiexp.pbt.exchange import Exchange
from gmiexp.pbt.members import Life
from gmiexp.rl import exploit


@pytest.fixture
def exchange():
    logged: list[dict[str, Any]] = []
    ex = Exchange(lambda member: 0, lambda event, **fields: logged.append({"event": event, **fields}))
    ex.logged = logged  # type: ignore[attr-defined]
    yield ex
    ex.close()


def life(tmp_path: Path, member: int, values: dict[str, Any]) -> Life:
    run_dir = tmp_path / str(member)
    run_dir.mkdir()
    return Life(member, 0, dict(values), Job(member, [], run_dir))


def test_a_published_state_is_kept_until_its_interval_is_decided_and_no_exploit_waits_for_it(exchange, tmp_path):
    for m in (0, 1):
        exploit.write_segment(exchange.segment(m, 1), b"state")
    exchange.keep(0, tmp_path, 1)
    exchange.keep(1, tmp_path, 1)
    exchange.keep(1, tmp_path, 2)  # not published: nothing to keep
    assert set(exchange.segments) == {(0, 1), (1, 1)}
    exchange.drop_segments(set(), complete=lambda interval: False)  # a member has not posted interval 1 yet
    assert exploit.published(exchange.segment(0, 1)) and len(exchange.segments) == 2
    exchange.drop_segments({1}, complete=lambda interval: True)  # a record of interval 1 is still to decide
    assert exploit.published(exchange.segment(0, 1))
    taker = life(tmp_path, 2, {"train.gamma": 0.99})
    exchange.verdicts = 3
    exchange.take(exchange.next_id(), taker, 100, 0, 1, exchange.segments[(0, 1)], {"train.gamma": 0.98},
                  {"train.gamma": 0.97})
    exchange.drop_segments(set(), complete=lambda interval: True)  # member 2 has not taken member 0's state yet
    assert exploit.published(exchange.segment(0, 1))
    assert exploit.take_control(taker.job.run_dir) == exploit.Control(4, 0, 1, exchange.segment(0, 1),
                                                                      {"train.gamma": 0.98}, {"train.gamma": 0.97})
    exchange.collect_acks(ended=lambda life: True)  # it ended without taking it
    exchange.drop_segments(set(), complete=lambda interval: True)
    assert not exchange.segments and not any(exploit.published(exchange.segment(m, 1)) for m in (0, 1))
    assert exchange.logged[-1]["done"] == "not taken: the member ended first"


def test_an_acknowledged_exploit_gives_the_member_its_values_and_logs_its_cost(exchange, tmp_path):
    taker = life(tmp_path, 1, {"train.learning_rate": 3e-4})
    exchange.verdicts = 6
    exchange.take(exchange.next_id(), taker, 1000, 0, 2, "seg", {"train.learning_rate": 6e-4},
                  {"train.learning_rate": 5e-4})
    control = exploit.take_control(taker.job.run_dir)
    exchange.collect_acks(ended=lambda life: False)
    assert 1 in exchange.in_place and taker.values == {"train.learning_rate": 3e-4}  # not taken yet
    exploit.acknowledge(taker.job.run_dir, control, epoch=9, frames=1200)
    exchange.collect_acks(ended=lambda life: False)
    assert not exchange.in_place and taker.values == {"train.learning_rate": 6e-4}
    done = exchange.logged[-1]
    assert (done["event"], done["id"], done["source"], done["frames_lost"]) == ("exploited", 7, 0, 200)
    assert done["seconds"] >= 0


def test_a_verdict_to_go_on_counts_on_from_the_verdicts_a_resume_restored(exchange, tmp_path):
    exchange.verdicts = 11  # what the log held (gmiexp.pbt.state.replay)
    exchange.go_on(tmp_path, 3)
    assert exploit.take_control(tmp_path) == exploit.go_on(3, 12) and exchange.verdicts == 12
