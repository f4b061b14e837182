"""A population on two loopback nodes sharing a run dir: 4 torch cart-pole members, 2 per node, in place; the
exploits that cross nodes take their leader's bytes through node 0's store; nothing is left behind; it trains as the
same population on one node; a stop of node 1 stops the population and the same commands go on with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gmitest import FAST, cli_env, gmiexp_workers, popen_cli, processes_naming, run_cli, terminal_signals
from pbt_checks import events, exploits_in_place

from gmiexp.launch.launcher import free_port
from gmiexp.shm.cleanup import leftovers

EPOCH_FRAMES = 32 * 16  # FAST: 32 environments x horizon 16, one GMI
# one torch thread a GMI whatever the slot's cores, so that one node and two train alike on any host
POPULATION = [*FAST, "num_gpus=1", "gmis_per_gpu=1", "max_iterations=2", "pbt=default", "pbt.population=4",
              "pbt.exploit=inplace", f"pbt.interval_steps={EPOCH_FRAMES}", "pbt.threshold_std=0",
              "pbt.threshold_abs=0", "+pbt.init={train.learning_rate:[1e-5,1e-2]}",
              "+pbt.mutation={train.e_clip:mutate_eps_clip}", "pbt.mutation_rate=1", "seed=2", "train.torch_threads=1"]
NODES = ["launch.nnodes=2"]


def start_nodes(run_dir: Path, port: int, *extra: str, slurm: bool = False) -> list[subprocess.Popen]:
    """Node 0 and node 1; ``slurm``: as the tasks of a 2-node Slurm step (the rank from ``SLURM_NODEID``)."""
    common = [*POPULATION, *NODES, *extra, f"launch.rdzv_endpoint=127.0.0.1:{port}", f"hydra.run.dir={run_dir}"]
    if not slurm:
        return [popen_cli(*common, f"launch.node_rank={r}") for r in (0, 1)]
    return [subprocess.Popen([sys.executable, "-m", "gmiexp", *common], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True, preexec_fn=terminal_signals,
                             env={**cli_env(), "SLURM_JOB_ID": "4242", "SLURM_NODEID": str(r),
                                  "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NNODES": "2"})
            for r in (0, 1)]


def finish(procs: list[subprocess.Popen], timeout: float) -> list[tuple[int, str, str]]:
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        out.append((p.returncode, o, e))
    return out


@pytest.fixture(scope="module")
def population(tmp_path_factory) -> tuple[Path, list[tuple[int, str, str]]]:
    run_dir = tmp_path_factory.mktemp("pbt_nodes")
    return run_dir, finish(start_nodes(run_dir, free_port()), 850)


# slow: 30 s of the default suite's worker time on the 2-core host, where it has no room left (the parts are in
# tests/pbt/test_pbt_nodes.py, which relays a state both ways); seed 2 has exploits across nodes both ways at
# interval 1 on the 2-core host
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_nodes_train_one_population_and_exploits_across_nodes_take_the_leaders_bytes(population) -> None:
    run_dir, [(code0, out0, err0), (code1, out1, err1)] = population
    assert code0 == 0, err0[-3000:]
    assert code1 == 0, err1[-3000:]
    assert "gmiexp pbt ok: 4 members" in out0 and "gmiexp pbt node 1 ok: members 2, 3 (2 lives)" in out1
    assert "gmiexp pbt node 1 ok" not in out0 and "gmiexp pbt ok" not in out1
    ev = events(run_dir)
    assert {e["member"]: e["node"] for e in ev if e["event"] == "start"} == {0: 0, 1: 0, 2: 1, 3: 1}
    exploits = exploits_in_place(ev, 4, 2, EPOCH_FRAMES)  # each took its source's bytes of that very interval
    relayed = {e["id"]: e for e in ev if e["event"] == "relayed"}
    across = [(d, t) for d, t, _ in exploits if (d["member"] < 2) != (d["source"] < 2)]
    assert across and sorted(relayed) == sorted(d["id"] for d, _ in across)  # every one across nodes relayed
    for d, _ in across:
        r = relayed[d["id"]]
        assert (r["node"], r["source_node"]) == (d["member"] // 2, d["source"] // 2)
    (seen,) = [e for e in ev if e["event"] == "nodes"]
    tags = [seen["tag"], *(a["tag"] for a in seen["agents"])]
    assert all(leftovers(t) == [] for t in tags)  # every published and relayed state removed on both nodes


@pytest.mark.slow
def test_no_process_is_left_behind_on_either_node(population) -> None:
    run_dir, _ = population
    assert gmiexp_workers(run_dir) == []
    assert processes_naming(run_dir) == []


# slow: the same population on one node (about 20 s more than the two nodes')
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_nodes_train_as_the_same_population_on_one_node(population, tmp_path: Path) -> None:
    """Every record (member, interval, frames, return) and every decision (source, values) equal: placement is no
    part of what a population learns."""
    run_dir, _ = population
    r = run_cli(*POPULATION, f"hydra.run.dir={tmp_path}", timeout=850)
    assert r.returncode == 0, r.stderr[-3000:]

    def outcome(d: Path) -> tuple[list, list]:
        ev = events(d)
        records = sorted((e["member"], e["interval"], e["frames"], e["objective"]) for e in ev
                         if e["event"] == "record")
        decisions = sorted((e["member"], e["interval"], e.get("source"), repr(e.get("values"))) for e in ev
                           if e["event"] == "decision")
        return records, decisions

    assert outcome(run_dir) == outcome(tmp_path)


# slow: two starts of two nodes (the stop after the first interval, then on to the end)
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_stop_of_node_1_stops_the_population_and_the_same_commands_go_on(tmp_path: Path) -> None:
    procs = start_nodes(tmp_path, free_port(), "max_iterations=4")
    deadline = time.monotonic() + 700
    while not any(e["event"] == "decision" for e in _events(tmp_path)):
        assert all(p.poll() is None for p in procs) and time.monotonic() < deadline
        time.sleep(0.2)
    os.kill(procs[1].pid, signal.SIGTERM)  # node 1's agent, as a scheduler stops a task
    (code0, _, err0), (code1, _, err1) = finish(procs, 300)
    assert (code0, code1) == (130, 130), (err0[-2000:], err1[-2000:])
    assert "node 1's agent was stopped" in err0
    assert gmiexp_workers(tmp_path) == [] and processes_naming(tmp_path) == []
    stopped = _events(tmp_path)
    assert stopped[-1]["event"] == "stopped" and stopped[-1]["reason"] == "interrupted"

    results = finish(start_nodes(tmp_path, free_port(), "max_iterations=4"), 850)
    assert [c for c, _, _ in results] == [0, 0], [e[-2000:] for _, _, e in results]
    ev = _events(tmp_path)
    kinds = [e["event"] for e in ev]
    assert kinds.count("population") == 1 and kinds.count("nodes") == 2
    assert kinds.index("stopped") < kinds.index("resumed") < kinds.index("finished")
    again = [e for e in ev[kinds.index("resumed"):] if e["event"] == "start"]
    assert sorted((e["member"], e["node"], e["cause"]) for e in again) == [
        (0, 0, "resume"), (1, 0, "resume"), (2, 1, "resume"), (3, 1, "resume")]
    assert {(e["member"], e["interval"]) for e in ev if e["event"] == "record"} >= {
        (m, k) for m in range(4) for k in range(1, 5)}


def _events(run_dir: Path) -> list[dict]:
    try:
        return events(run_dir)
    except (OSError, ValueError):
        return []


def _wait_event(run_dir: Path, procs: list[subprocess.Popen], what, timeout: float = 700) -> None:
    deadline = time.monotonic() + timeout
    while not any(what(e) for e in _events(run_dir)):
        assert all(p.poll() is None for p in procs) and time.monotonic() < deadline
        time.sleep(0.2)


# slow: a population of two nodes that trains on after the failure (about 35 s on the quiet host); the nodes are
# the tasks of a 2-node Slurm step, whose variables every member inherits (each is still a run of one node)
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_member_killed_on_node_1_restarts_there_from_its_checkpoint(tmp_path: Path) -> None:
    from gmiexp.status import gmi_pids

    procs = start_nodes(tmp_path, free_port(), "max_iterations=4", "pbt.threshold_std=100", slurm=True)
    _wait_event(tmp_path, procs, lambda e: e["event"] == "record" and e["member"] == 3 and e["interval"] == 1)
    os.kill(gmi_pids(tmp_path / "members" / "3" / "life0", [0])[0], signal.SIGKILL)
    (code0, out0, err0), (code1, out1, err1) = finish(procs, 850)
    assert (code0, code1) == (0, 0), (err0[-2000:], err1[-2000:])
    assert "members 2, 3 (3 lives)" in out1
    ev = events(tmp_path)
    (failed,) = [e for e in ev if e["event"] == "failed"]
    assert failed["member"] == 3 and "restarts from its checkpoint" in failed["then"]
    again = [e for e in ev if e["event"] == "start" and e["cause"] == "failed"]
    assert [(e["member"], e["node"], e["life"]) for e in again] == [(3, 1, 1)]
    assert {(e["member"], e["interval"]) for e in ev if e["event"] == "record"} >= {
        (m, k) for m in range(4) for k in range(1, 5)}
    assert gmiexp_workers(tmp_path) == [] and processes_naming(tmp_path) == []


# slow: node 0's controller killed (kill -9): node 1's agent stops its members within seconds, exit 1
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_kill_9_of_node_0_stops_node_1_and_its_members(tmp_path: Path) -> None:
    procs = start_nodes(tmp_path, free_port(), "max_iterations=50")
    _wait_event(tmp_path, procs, lambda e: e["event"] == "record" and e["interval"] == 1)
    killed = time.monotonic()
    procs[0].kill()
    (_, _, _), (code1, _, err1) = finish(procs, 120)
    assert code1 == 1 and "node 0's population controller is gone" in err1, err1[-2000:]
    assert "frame #" not in err1  # c10d's C++ frames went to the node's store log
    assert time.monotonic() - killed < 60
    deadline = time.monotonic() + 60  # node 0's members follow their dead controller (lifeline)
    while (gmiexp_workers(tmp_path) or processes_naming(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert gmiexp_workers(tmp_path) == [] and processes_naming(tmp_path) == []
