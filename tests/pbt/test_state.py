"""Replaying a population's log into the controller's state (gmiexp.pbt.state.replay), on given event tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gmiexp.pbt.rules import Record
from gmiexp.pbt.state import replay, rewind

LR = "train.learning_rate"


def start(m: int, life: int, lr: float, frames: int = 0, cause: str = "new", checkpoint: str | None = None,
          copy: bool = False, grace: int | None = None, source_interval: int | None = None) -> dict[str, Any]:
    return {"event": "start", "member": m, "life": life, "values": {LR: lr}, "run_dir": f"/r/members/{m}/life{life}",
            "frames": frames, "grace_frames": frames if grace is None else grace, "cause": cause,
            "checkpoint": checkpoint, "copy": copy,
            **({"source_interval": source_interval} if source_interval is not None else {})}


def record(m: int, interval: int, objective: float, checkpoint: str | None = None) -> dict[str, Any]:
    return {"event": "record", "member": m, "life": 0, "interval": interval, "frames": 100 * interval,
            "objective": objective, "best": objective, "checkpoint": checkpoint}


HEAD = {"event": "population", "population": 2, "epochs_per_interval": 1, "frames_per_epoch": 100,
        "max_iterations": 4, "key": "k"}


def test_nothing_to_replay_without_a_population_event() -> None:
    assert replay([start(0, 0, 1e-3)]) is None


def test_an_in_place_exploit_taken_changes_the_member_s_values_and_its_grace() -> None:
    evs = [HEAD, start(0, 0, 1e-3), start(1, 0, 1e-2), record(0, 1, 5.0, "/c/0-1.pth"), record(1, 1, 1.0),
           {"event": "decision", "member": 1, "interval": 1, "source": 0, "source_interval": 1, "source_frames": 100,
            "values": {LR: 2e-3}, "exploit": "inplace", "id": 7},
           {"event": "exploited", "member": 1, "id": 7, "values": {LR: 2e-3}, "frames": 100},
           record(1, 2, 6.0)]
    r = replay(evs)
    assert r is not None and r.head is HEAD and r.exploits == 1 and r.verdicts == 7
    assert r.members[1].values == {LR: 2e-3} and r.members[1].started_frames == 100
    assert r.values_at[(1, 1)] == {LR: 1e-2} and r.values_at[(1, 2)] == {LR: 2e-3}  # the values it had then
    assert r.checkpoints == {(0, 1): Path("/c/0-1.pth")}
    assert r.records == [Record(0, 1, 100, 5.0, 5.0), Record(1, 1, 100, 1.0, 1.0), Record(1, 2, 200, 6.0, 6.0)]
    assert r.members[1].unstarted is None and not r.finished and r.segments == 1


def test_a_restart_decided_and_not_started_before_the_stop_is_kept_for_the_member() -> None:
    decision = {"event": "decision", "member": 1, "interval": 1, "source": 0, "source_interval": 1,
                "source_frames": 100, "values": {LR: 2e-3}, "exploit": "restart", "checkpoint": "/c/0-1.pth"}
    r = replay([HEAD, start(0, 0, 1e-3), start(1, 0, 1e-2), decision, {"event": "stopped"}])
    assert r is not None and r.members[1].unstarted == decision and r.members[0].unstarted is None
    done = replay([HEAD, start(0, 0, 1e-3), start(1, 0, 1e-2), decision,
                   start(1, 1, 2e-3, 100, "exploit", "/c/0-1.pth", copy=True)])
    assert done is not None and done.members[1].unstarted is None and done.members[1].copy


def test_a_resume_from_the_member_s_own_checkpoint_forgets_what_it_trained_past_it() -> None:
    evs = [HEAD, start(0, 0, 1e-3), start(1, 0, 1e-2, grace=0), record(0, 1, 5.0), record(1, 1, 1.0, "/c/1-1.pth"),
           record(1, 2, 2.0, "/c/1-2.pth"), {"event": "failed", "member": 1, "life": 0, "code": -9},
           {"event": "stopped", "reason": "interrupted"},
           {"event": "resumed", "segment": 2, "max_iterations": 6},
           start(0, 1, 1e-3, 100, "resume", "/c/0-1.pth"), start(1, 1, 1e-2, 100, "resume", "/c/1-1.pth", grace=0),
           {"event": "finished"}]
    r = replay(evs)
    assert r is not None
    assert [(x.member, x.iteration) for x in r.records] == [(0, 1), (1, 1)]  # member 1's interval 2: trained again
    assert r.checkpoints == {(1, 1): Path("/c/1-1.pth")}
    assert (r.members[1].life, r.members[1].frames, r.members[1].started_frames) == (1, 100, 0)
    assert r.members[1].run_dir == Path("/r/members/1/life1") and r.members[1].checkpoint == "/c/1-1.pth"
    assert [f["code"] for f in r.failures] == [-9]
    assert r.segments == 2 and r.max_iterations == 6 and r.finished


def test_a_stop_after_the_last_finish_is_not_finished() -> None:
    r = replay([HEAD, start(0, 0, 1e-3), {"event": "finished"}, {"event": "resumed", "segment": 2},
                {"event": "stopped"}])
    assert r is not None and not r.finished and r.max_iterations == 4  # the resume did not say another


def test_a_copy_forgets_what_the_member_s_old_life_ran_ahead_past_the_source_s_interval() -> None:
    """Restart mode: member 1's life 0 posted interval 2 before its interval-1 verdict (copy member 0's interval 1)
    came. Its new life trains interval 2 again; before, the table at interval 2 kept life 0's record, so a decision
    there could wait for nothing and copy a lineage that was gone, as the run's timing fell."""
    evs = [HEAD, start(0, 0, 1e-3), start(1, 0, 1e-2), record(0, 1, 5.0, "/c/0-1.pth"),
           record(1, 1, 1.0, "/c/1-1.pth"), record(1, 2, 9.0, "/c/1-2.pth"),
           start(1, 1, 1e-3, 100, "exploit", "/c/0-1.pth", copy=True, source_interval=1)]
    r = replay(evs)
    assert r is not None
    assert [(x.member, x.iteration) for x in r.records] == [(0, 1), (1, 1)]
    assert r.checkpoints == {(0, 1): Path("/c/0-1.pth"), (1, 1): Path("/c/1-1.pth")}
    older = replay(evs[:-1] + [start(1, 1, 1e-3, 100, "exploit", "/c/0-1.pth", copy=True)])  # a log before the key
    assert older is not None and [(x.member, x.iteration) for x in older.records] == [(0, 1), (1, 1), (1, 2)]


def test_what_a_start_forgets_of_the_member_s_earlier_life() -> None:
    def left(**start: object) -> list[tuple[int, int]]:
        records = [Record(0, 1, 100, 1.0), Record(1, 1, 100, 1.0), Record(1, 2, 200, 2.0), Record(1, 3, 320, 3.0)]
        checkpoints = {(1, k): Path(f"/c/1-{k}.pth") for k in (1, 2, 3)}
        rewind(records, checkpoints, 1, **start)  # type: ignore[arg-type]
        assert set(checkpoints) == {(m, k) for m, k, in ((r.member, r.iteration) for r in records) if m == 1}
        return [(r.member, r.iteration) for r in records]

    # a copy: by the source's interval (frames differ where train.horizon_length was mutated)
    assert left(copy=True, cause="exploit", frames=100, source_interval=2) == [(0, 1), (1, 1), (1, 2)]
    assert left(copy=True, cause="failed", frames=100, source_interval=1) == [(0, 1), (1, 1)]
    # its own checkpoint: by its frames
    assert left(copy=False, cause="resume", frames=200, source_interval=None) == [(0, 1), (1, 1), (1, 2)]
    assert left(copy=False, cause="failed", frames=0, source_interval=None) == [(0, 1)]
    assert left(copy=False, cause="new", frames=0, source_interval=None) == [(0, 1), (1, 1), (1, 2), (1, 3)]
