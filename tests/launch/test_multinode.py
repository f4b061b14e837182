"""Two "nodes" on loopback (two launchers): training in sync, failures that stop both nodes, no orphans."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from gmitest import FAST, StopClock, popen_cli, run_cli

from gmiexp.launch.launcher import free_port
from gmiexp.shm.names import SHM_DIR
from gmiexp.status import read_history, read_status

PPO = [*FAST, "reduction=allreduce", "train.check_sync=true", "seed=7"]


def start_nodes(tmp_path: Path, *args: str, shared_dir: bool = True,
                node1: tuple[str, ...] = ()) -> list[subprocess.Popen]:
    """Node 0 and node 1, each ``python -m gmiexp ... launch.node_rank=R``, meeting at a free loopback port."""
    common = [*args, "num_gpus=1", "gmis_per_gpu=2", "launch.nnodes=2",
              f"launch.rdzv_endpoint=127.0.0.1:{free_port()}"]
    return [popen_cli(*common, f"launch.node_rank={r}", *(node1 if r else ()),
                      f"hydra.run.dir={tmp_path if shared_dir else tmp_path / f'host{r}'}") for r in (0, 1)]


def node_dir(tmp_path: Path, node: int, shared_dir: bool = True) -> Path:
    return (tmp_path if shared_dir else tmp_path / f"host{node}") / f"node{node}"


def finish(procs: list[subprocess.Popen], timeout: float) -> list[str]:
    """Every launcher's stderr once it exited (killed after ``timeout``)."""
    errs = []
    for p in procs:
        try:
            errs.append(p.communicate(timeout=timeout)[1])
        except subprocess.TimeoutExpired:
            p.kill()
            errs.append(p.communicate()[1])
    return errs


def wait_stage(run_dir: Path, gmi: int, stage: str, timeout: float = 120) -> dict:
    end = time.time() + timeout
    while time.time() < end:
        s = read_status(run_dir, gmi) or {}
        if s.get("stage") == stage:
            return s
        time.sleep(0.2)
    raise AssertionError(f"GMI {gmi} never reached stage {stage!r}: {read_status(run_dir, gmi)}")


def assert_nothing_left(procs: list[subprocess.Popen], pids: list[int]) -> None:
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid
    for p in procs:  # segments are tagged with their launcher's pid (gmiexp.shm.names.launcher_tag)
        assert not list(SHM_DIR.glob(f"gmiexp_{p.pid}-*")), p.pid


def digests(run_dir: Path, gmi: int) -> list[str]:
    return [r["sync/digest"] for r in read_history(run_dir, gmi)]


def test_two_nodes_train_bit_identical_and_as_one_node(tmp_path: Path, no_orphans: None) -> None:
    procs = start_nodes(tmp_path / "two", *PPO, "max_iterations=3")
    errs = finish(procs, timeout=240)
    assert [p.returncode for p in procs] == [0, 0], errs[0][-3000:] + errs[1][-3000:]
    two = {g: digests(node_dir(tmp_path / "two", g // 2), g) for g in range(4)}
    assert len(two[0]) == 3 and all(d == two[0] for d in two.values()), two  # every epoch, all 4 GMIs
    r = run_cli(*PPO, "max_iterations=3", "num_gpus=1", "gmis_per_gpu=4", f"hydra.run.dir={tmp_path / 'one'}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert digests(tmp_path / "one", 0) == two[0]  # same seed: 2 nodes x 2 GMIs == 1 node x 4 GMIs

    run = json.loads((tmp_path / "two" / "summary.json").read_text())  # node 0 speaks for the run
    assert run["status"] == "ok" and run["config"]["gmis"] == 4 and sorted(run["nodes"]) == ["0", "1"]
    m = run["metrics"]
    assert sorted(run["gmis"]) == ["0", "1", "2", "3"]
    assert m["perf/env_steps_per_s"] == pytest.approx(sum(m[f"perf/gmi/{g}/env_steps_per_s"] for g in range(4)))
    assert all(m[f"perf/gmi/{g}/env_steps_per_s"] > 0 for g in range(4)) and "time/comm_s" in m
    node1 = json.loads((node_dir(tmp_path / "two", 1) / "summary.json").read_text())
    assert node1["node"] == 1 and sorted(node1["gmis"]) == ["2", "3"]
    assert (node_dir(tmp_path / "two", 1) / "plan.yaml").exists() and not (tmp_path / "two" / "plan.yaml").exists()


def test_a_gmi_killed_on_node_1_stops_both_nodes_within_10s(tmp_path: Path, no_orphans: None) -> None:
    procs = start_nodes(tmp_path, "role=user_roles:SleepRole", *FAST, shared_dir=False)
    try:
        pids = [int(wait_stage(node_dir(tmp_path, g // 2, False), g, "sleeping")["pid"]) for g in range(4)]
        clock = StopClock(pids).start()
        psutil.Process(pids[3]).kill()
        errs = finish(procs, timeout=30)
    finally:
        finish(procs, timeout=0.1)
    assert all(p.returncode not in (0, None) for p in procs), errs
    assert clock.elapsed() < 10, f"the GMIs took {clock.elapsed():.1f}s to stop"
    for err in errs:
        assert "GMI 3 on node 1 failed (exit code -9); every GMI on every node was stopped" in err, err[-3000:]
    assert_nothing_left(procs, pids)
    run = json.loads((tmp_path / "host0" / "summary.json").read_text())
    assert run["status"] == "failed" and "GMI 3 on node 1" in run["error"]


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_kill_9_of_node_1s_launcher_stops_node_0_within_the_heartbeat_timeout(tmp_path: Path,
                                                                              no_orphans: None) -> None:
    timeout_s = 5
    procs = start_nodes(tmp_path, "role=user_roles:SleepRole", *FAST, f"launch.heartbeat_timeout_s={timeout_s}")
    try:
        pids = [int(wait_stage(node_dir(tmp_path, g // 2), g, "sleeping")["pid"]) for g in range(4)]
        t0 = time.time()
        procs[1].send_signal(signal.SIGKILL)
        err0 = finish(procs[:1], timeout=60)[0]
        elapsed = time.time() - t0
    finally:
        finish(procs, timeout=0.1)
    assert procs[0].returncode == 1, err0[-3000:]
    assert "node 1 is gone: its launcher sent no heartbeat" in err0, err0[-3000:]
    assert elapsed < timeout_s + 5, f"node 0 took {elapsed:.1f}s to stop"
    assert_nothing_left(procs, pids)


@pytest.mark.slow
def test_a_gmi_killed_while_training_is_named_over_its_peers_gloo_errors(tmp_path: Path, no_orphans: None) -> None:
    """Its peers on both nodes fail at once in their next all-reduce: every node's error still names GMI 2.

    Node 1's agent polls its workers slowly, so node 0 reports its GMIs' (secondary) gloo failures first and
    stops node 1 before node 1's agent has even seen GMI 2 die.
    """
    procs = start_nodes(tmp_path, *PPO, "max_iterations=10000", node1=("launch.monitor_interval_s=4",))
    try:
        wait_stage(node_dir(tmp_path, 0), 0, "training")
        st = wait_stage(node_dir(tmp_path, 1), 2, "training")
        time.sleep(2)  # well into the epochs
        psutil.Process(int(st["pid"])).kill()
        t0 = time.time()
        errs = finish(procs, timeout=30)
        elapsed = time.time() - t0
    finally:
        finish(procs, timeout=0.1)
    assert all(p.returncode == 1 for p in procs), errs
    assert elapsed < 10, f"took {elapsed:.1f}s to stop"
    for err in errs:
        assert "GMI 2 on node 1 failed (exit code -9); every GMI on every node was stopped" in err, err[-3000:]


@pytest.mark.slow
def test_kill_9_of_node_0s_launcher_stops_node_1(tmp_path: Path, no_orphans: None) -> None:
    """Node 0's launcher serves the store: node 1 finds it gone and stops, naming node 0."""
    procs = start_nodes(tmp_path, "role=user_roles:SleepRole", *FAST)
    try:
        pids = [int(wait_stage(node_dir(tmp_path, g // 2), g, "sleeping")["pid"]) for g in range(4)]
        clock = StopClock(pids).start()
        procs[0].send_signal(signal.SIGKILL)
        err1 = finish(procs[1:], timeout=60)[0]
    finally:
        finish(procs, timeout=0.1)
    assert procs[1].returncode == 1, err1[-3000:]
    assert "node 0 is gone: its store at launch.rdzv_endpoint=127.0.0.1:" in err1, err1[-3000:]
    assert clock.elapsed() < 10, f"the GMIs took {clock.elapsed():.1f}s to stop"
    assert_nothing_left(procs, pids)
