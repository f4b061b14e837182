"""A population on two loopback nodes sharing a run dir: 4 torch cart-pole members, 2 per node, 3 intervals in
place; the exploits that cross nodes take their leader's bytes through node 0's store; nothing is left behind; a
stop of node 1 stops the population and the same commands go on with it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from gmitest import FAST, gmiexp_workers, popen_cli, processes_naming
from pbt_checks import events, exploits_in_place

from gmiexp.launch.launcher import free_port
from gmiexp.shm.cleanup import leftovers

EPOCH_FRAMES = 32 * 16  # FAST: 32 environments x horizon 16, one GMI
POPULATION = [*FAST, "num_gpus=1", "gmis_per_gpu=1", "max_iterations=3", "pbt=default", "pbt.population=4",
              "pbt.exploit=inplace", f"pbt.interval_steps={EPOCH_FRAMES}", "pbt.threshold_std=0",
              "pbt.threshold_abs=0", "+pbt.init={train.learning_rate:[1e-5,1e-2]}",
              "+pbt.mutation={train.e_clip:mutate_eps_clip}", "pbt.mutation_rate=1", "seed=2", "launch.nnodes=2"]


def start_nodes(run_dir: Path, port: int, *extra: str) -> list[subprocess.Popen]:
    common = [*POPULATION, *extra, f"launch.rdzv_endpoint=127.0.0.1:{port}", f"hydra.run.dir={run_dir}"]
    return [popen_cli(*common, f"launch.node_rank={r}") for r in (0, 1)]


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


# in the default suite: 26 s on the quiet 2-core host (the 4 members start 2 and 2, as on one node)
@pytest.mark.timeout(900)
def test_two_nodes_train_one_population_and_exploits_across_nodes_take_the_leaders_bytes(population) -> None:
    run_dir, [(code0, out0, err0), (code1, out1, err1)] = population
    assert code0 == 0, err0[-3000:]
    assert code1 == 0, err1[-3000:]
    assert "gmiexp pbt ok: 4 members" in out0 and "gmiexp pbt node 1 ok: members 2, 3 (2 lives)" in out1
    ev = events(run_dir)
    assert {e["member"]: e["node"] for e in ev if e["event"] == "start"} == {0: 0, 1: 0, 2: 1, 3: 1}
    exploits = exploits_in_place(ev, 4, 3, EPOCH_FRAMES)  # each took its source's bytes of that very interval
    relayed = {e["id"]: e for e in ev if e["event"] == "relayed"}
    across = [(d, t) for d, t, _ in exploits if (d["member"] < 2) != (d["source"] < 2)]
    assert across and sorted(relayed) == sorted(d["id"] for d, _ in across)  # every one across nodes relayed
    for d, _ in across:
        r = relayed[d["id"]]
        assert (r["node"], r["source_node"]) == (d["member"] // 2, d["source"] // 2)
    (seen,) = [e for e in ev if e["event"] == "nodes"]
    tags = [seen["tag"], *(a["tag"] for a in seen["agents"])]
    assert all(leftovers(t) == [] for t in tags)  # every published and relayed state removed on both nodes


def test_no_process_is_left_behind_on_either_node(population) -> None:
    run_dir, _ = population
    assert gmiexp_workers(run_dir) == []
    assert processes_naming(run_dir) == []


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
