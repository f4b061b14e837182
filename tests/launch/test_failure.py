"""Root cause over secondary failures: the worker's exit code, the launcher's own kills, elastic's bookkeeping."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from gmiexp.errors import LaunchError, RefusedInGmi
from gmiexp.launch.failure import (
    COMM_EXIT_CODE,
    Failure,
    describe,
    is_comm_error,
    process_failures,
    root_cause,
    run_error,
)

GLOO = ("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:4841. "
        "This is typically caused by a remote worker crashing.")


def failure(node: int, gmi: int, secondary: bool, t: float = 100.0) -> Failure:
    return Failure(node=node, gmi=gmi, head=f"GMI {gmi} on node {node} failed", tail=f"tail {gmi}",
                   secondary=secondary, time=t)


def test_a_gloo_error_raised_through_the_role_is_a_communication_error() -> None:
    try:
        try:
            raise RuntimeError(GLOO)
        except RuntimeError as e:
            raise ValueError("rl-games wrapped it") from e
    except ValueError as wrapped:
        assert is_comm_error(wrapped)
    assert not is_comm_error(RuntimeError("CUDA out of memory"))
    assert not is_comm_error(ZeroDivisionError("division by zero"))


def test_the_root_failure_wins_over_earlier_secondary_ones() -> None:
    fs = [failure(0, 0, True, t=1.0), failure(0, 1, True, t=1.0), failure(1, 3, False, t=5.0)]
    assert root_cause(fs).gmi == 3
    assert root_cause([failure(0, 1, True, t=2.0), failure(1, 2, True, t=1.0)]).gmi == 2  # no root: earliest
    assert root_cause([]) is None


def test_describe_names_the_root_and_a_vanished_node_over_secondary_failures() -> None:
    msg = describe([failure(0, 0, True), failure(1, 3, False)], nnodes=2)
    assert msg == "GMI 3 on node 1 failed; every GMI on every node was stopped\ntail 3"
    gone = "node 1 is gone: its launcher sent no heartbeat for 5.2s"
    assert describe([failure(0, 0, True)], 2, gone, node_gone=True).startswith(gone + "; every GMI on every node")
    assert describe([failure(0, 0, False)], 2, gone, node_gone=True).startswith("GMI 0 on node 0 failed")
    assert describe([], 1) is None
    assert describe([failure(0, 1, False)], 1).startswith("GMI 1 on node 0 failed; every GMI was stopped")


def test_a_root_gmis_refusal_is_bad_input_and_any_other_failure_a_launch_error(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "run_x" / "attempt_0" / "0"
    log.mkdir(parents=True)
    (log / "stderr.log").write_text("importing\ngmiexp: error: invalid task.vec_env: 'm:f'; cannot import module 'm'\n")
    err = SimpleNamespace(failures={0: SimpleNamespace(local_rank=0, pid=7, exitcode=2, timestamp=10)})
    [refused] = process_failures(err, {0: 1}, node=0, nnodes=1, run_dir=tmp_path, killed=set())  # type: ignore[arg-type]
    assert refused.refusal == "invalid task.vec_env: 'm:f'; cannot import module 'm'" and not refused.secondary
    e = run_error([failure(0, 0, True, t=1.0), refused], nnodes=1)
    assert isinstance(e, RefusedInGmi) and e.exit_code == 2
    assert str(e) == "invalid task.vec_env: 'm:f'; cannot import module 'm' (GMI 1 refused it at start and exited 2; " \
                     "every GMI was stopped)"
    killed = run_error([failure(0, 0, False, t=1.0), refused], nnodes=1)  # another GMI's failure came first
    assert type(killed) is LaunchError and str(killed).startswith("GMI 0 on node 0 failed")
    gone = run_error([refused], 2, "node 1 is gone", node_gone=True)  # a node vanished: that is named instead
    assert isinstance(gone, RefusedInGmi)  # a root failure wins over a vanished node (describe's rule)
    assert type(run_error([], 1, fallback="launch failed: x")) is LaunchError


@pytest.mark.parametrize(("exitcode", "killed", "secondary"), [
    (-9, set(), False),  # killed from outside: the root
    (1, set(), False),  # a Python exception in the role
    (COMM_EXIT_CODE, set(), True),  # a peer's failure seen in a collective
    (-15, set(), True),  # elastic's SIGTERM to the survivors, listed "for bookkeeping"
    (-9, {4242}, True),  # killed by this launcher because another node failed
])
def test_elastic_failures_are_classified_by_exit_code_and_by_who_killed_them(
        tmp_path: Path, exitcode: int, killed: set[int], secondary: bool) -> None:
    log = tmp_path / "logs" / "run_x" / "attempt_0" / "1"
    log.mkdir(parents=True)
    (log / "stderr.log").write_text("Traceback\nboom\n")
    err = SimpleNamespace(failures={7: SimpleNamespace(local_rank=1, pid=4242, exitcode=exitcode, timestamp=10)})
    [f] = process_failures(err, {0: 2, 1: 3}, node=1, nnodes=2, run_dir=tmp_path, killed=killed)  # type: ignore[arg-type]
    assert (f.gmi, f.node, f.secondary) == (3, 1, secondary)
    assert f.head == f"GMI 3 on node 1 failed (exit code {exitcode})"
    assert "boom" in f.tail  # the tail of its LOCAL rank's log


def test_a_failed_gmis_head_names_the_exception_its_last_traceback_ended_with(tmp_path: Path) -> None:
    """The log's tail is the trainer's prints after the traceback (rl-games'): the head says what was raised."""
    log = tmp_path / "logs" / "run_x" / "attempt_0" / "0"
    log.mkdir(parents=True)
    (log / "stderr.log").write_text(
        "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n    g()\nKeyError: 'x'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n  File \"a.py\", line 3, in h\n    raise ShmFull(...)\n"
        "gmiexp.shm.segment.ShmFull: [Errno 28] /dev/shm has 4.0 KiB free\n"
        + "".join(f"=> saving checkpoint {i}\n" for i in range(30)))
    err = SimpleNamespace(failures={0: SimpleNamespace(local_rank=0, pid=7, exitcode=1, timestamp=10)})
    [f] = process_failures(err, {0: 0}, node=0, nnodes=1, run_dir=tmp_path, killed=set())  # type: ignore[arg-type]
    assert f.head == ("GMI 0 failed (exit code 1, pid 7): gmiexp.shm.segment.ShmFull: [Errno 28] /dev/shm has 4.0 "
                      "KiB free")
    (log / "stderr.log").write_text("no traceback\n")
    [f] = process_failures(err, {0: 0}, node=0, nnodes=1, run_dir=tmp_path, killed=set())  # type: ignore[arg-type]
    assert f.head == "GMI 0 failed (exit code 1, pid 7)"
