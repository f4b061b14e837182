"""Node launchers watching each other through one TCPStore, in one process (two Coordinators, node 0 and 1)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from gmiexp.errors import RefusedInGmi
from gmiexp.launch.coordinator import Coordinator
from gmiexp.launch.failure import Failure
from gmiexp.launch.launcher import free_port

TIMEOUT_S = 1.0


def fake_plan(node: int, port: int, run_dir: Path) -> SimpleNamespace:
    launch = SimpleNamespace(heartbeat_timeout_s=TIMEOUT_S, rdzv_endpoint=f"127.0.0.1:{port}", rdzv_id="t",
                             rdzv_timeout_s=10.0)
    # run_dir: the store's C++ log goes to its logs/
    return SimpleNamespace(node_rank=node, nnodes=2, launch=launch, run_dir=str(run_dir / f"node{node}"))


class Node:
    def __init__(self, node: int, port: int, run_dir: Path) -> None:
        self.stopped = threading.Event()
        self.coord = Coordinator(fake_plan(node, port, run_dir), stop_local=self.stopped.set)  # type: ignore[arg-type]


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[tuple[Node, Node]]:
    port = free_port()
    n0 = Node(0, port, tmp_path)
    n1 = Node(1, port, tmp_path)
    n0.coord.start()
    n1.coord.start()
    yield n0, n1
    n1.coord.close()
    n0.coord.close()


def test_a_failure_posted_by_node_1_stops_node_0_and_both_name_it(nodes: tuple[Node, Node]) -> None:
    n0, n1 = nodes
    root = Failure(node=1, gmi=3, head="GMI 3 on node 1 failed (exit code -9)", tail="boom", secondary=False,
                   time=1.0)
    done: dict[int, str | None] = {}
    t = threading.Thread(target=lambda: done.__setitem__(1, str(n1.coord.error([root], ""))))
    t.start()
    assert n0.stopped.wait(5), "node 0 did not stop its GMIs"
    assert "node 1 reported a failure" in (n0.coord.cause or "")
    mine = Failure(node=0, gmi=0, head="GMI 0 on node 0 failed (exit code -9)", tail="", secondary=True, time=0.5)
    assert str(n0.coord.error([mine], "")).startswith("GMI 3 on node 1 failed (exit code -9); every GMI on every node")
    t.join(10)
    assert (done[1] or "").startswith("GMI 3 on node 1 failed (exit code -9)")
    assert not n1.stopped.is_set()  # its own GMI failed: elastic stopped the rest, not the watch


def test_a_gmis_refusal_on_node_1_is_bad_input_on_both_nodes(nodes: tuple[Node, Node]) -> None:
    """A refusal (exit 2) crosses the store with its reason: every node ends as the command line would, exit 2."""
    n0, n1 = nodes
    root = Failure(node=1, gmi=3, head="GMI 3 on node 1 failed (exit code 2)", tail="", secondary=False, time=1.0,
                   refusal="invalid task.vec_env: 'm:f'; cannot import module 'm'")
    done: dict[int, Exception] = {}
    t = threading.Thread(target=lambda: done.__setitem__(1, n1.coord.error([root], "")))
    t.start()
    assert n0.stopped.wait(5), "node 0 did not stop its GMIs"
    mine = Failure(node=0, gmi=0, head="GMI 0 on node 0 failed (exit code -9)", tail="", secondary=True, time=0.5)
    e0 = n0.coord.error([mine], "")
    t.join(10)
    for e in (e0, done[1]):
        assert isinstance(e, RefusedInGmi), e
        assert str(e) == ("invalid task.vec_env: 'm:f'; cannot import module 'm' (GMI 3 on node 1 refused it at "
                          "start and exited 2; every GMI on every node was stopped)")


def test_a_silent_node_is_declared_gone_after_the_heartbeat_timeout(nodes: tuple[Node, Node]) -> None:
    n0, n1 = nodes
    time.sleep(0.5)
    t0 = time.monotonic()
    n1.coord.stop()  # its launcher stops beating, as after kill -9
    assert n0.stopped.wait(TIMEOUT_S + 3)
    assert TIMEOUT_S - 0.5 <= time.monotonic() - t0 < TIMEOUT_S + 2  # silent since its last beat, before t0
    assert (n0.coord.cause or "").startswith("node 1 is gone: its launcher sent no heartbeat")


def test_node_0_gone_stops_node_1(nodes: tuple[Node, Node]) -> None:
    n0, n1 = nodes
    n0.coord.close()  # the store's server goes with node 0's launcher
    assert n1.stopped.wait(5)
    assert (n1.coord.cause or "").startswith("node 0 is gone: its store at launch.rdzv_endpoint=127.0.0.1:")
    assert n1.coord.gone == {0}


def test_node_0_gathers_every_nodes_summary(nodes: tuple[Node, Node]) -> None:
    n0, n1 = nodes
    assert n1.coord.gather({"node": 1}, timeout_s=5) == {1: {"node": 1}}
    assert n0.coord.gather({"node": 0}, timeout_s=5) == {0: {"node": 0}, 1: {"node": 1}}
    time.sleep(2 * TIMEOUT_S)
    assert not n0.stopped.is_set()  # a node that finished is not silent


def test_a_node_that_never_started_is_named_at_once_not_after_the_heartbeat_timeout(tmp_path: Path) -> None:
    """Node 0's rendezvous timed out because node 1's launcher never ran: say so, without waiting for its report."""
    n0 = Node(0, free_port(), tmp_path)
    n0.coord.timeout_s = 60.0  # a wait for node 1's silence to count would take this long
    n0.coord.start()
    try:
        t0 = time.monotonic()
        text = str(n0.coord.error([], ""))
        assert time.monotonic() - t0 < 10
        assert text.startswith("node 1 never joined the run") and "launch.rdzv_timeout_s=10" in text
    finally:
        n0.coord.close()
