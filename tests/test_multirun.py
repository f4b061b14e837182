"""A sweep's failures reach its process from jobs run elsewhere (submitit): JobFailed records itself when unpickled."""

from __future__ import annotations

import pickle
import sys

import pytest

from gmiexp import multirun


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(multirun, "state", {"ran": False, "failed": {}, "pid": None})


def test_a_failure_unpickled_in_the_sweeps_process_is_recorded_there() -> None:
    blob = pickle.dumps(multirun.JobFailed("/sweep/3", 2, "job failed (exit code 2): /sweep/3"))
    assert multirun.state["failed"] == {}  # pickling records nothing
    err = pickle.loads(blob)
    assert (err.run_dir, err.code, str(err)) == ("/sweep/3", 2, "job failed (exit code 2): /sweep/3")
    assert multirun.state["ran"] and multirun.state["failed"] == {"/sweep/3": 2}
    pickle.loads(blob)  # read twice (a result fetched again): still one failure
    assert multirun.state["failed"] == {"/sweep/3": 2}


@pytest.mark.parametrize(("codes", "code"), [({}, 0), ({"a": 1}, 1), ({"a": 1, "b": 2}, 2), ({"a": 2, "b": 130}, 130)])
def test_the_sweep_exits_with_its_worst_jobs_code(codes: dict, code: int, capsys: pytest.CaptureFixture) -> None:
    for run_dir, c in codes.items():
        multirun.record_failure(run_dir, c)
    assert multirun.exit_code() == code
    assert (f"{len(codes)} multirun job(s) failed" in capsys.readouterr().err) == bool(codes)


def hydra_exit(err: Exception) -> None:
    """What Hydra's run_and_report does with an error from the sweep: print it, exit 1 inside the except."""
    try:
        raise err
    except Exception:
        sys.exit(1)


def test_an_error_raised_by_submitit_is_a_job_that_ended_elsewhere() -> None:
    from submitit.core.utils import UncompletedJobError

    for err, elsewhere in ((UncompletedJobError("job 7 has not produced any output"), True),
                           (ValueError("Could not override 'num_envz'"), False)):
        with pytest.raises(SystemExit) as e:
            hydra_exit(err)
        assert multirun.ended_elsewhere(e.value) is elsewhere
