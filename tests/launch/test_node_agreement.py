"""Nodes started with different settings exit 2 on every node, naming what differs, before any GMI starts.

Without the check, ``num_envs`` 64 vs 128 died in gloo ("Received data size doesn't match expected size"),
``max_iterations`` 5 vs 8 ran silently (node 1's plan saying 8 and running 5) and ``gmis_per_gpu`` 2 vs 1
hung at the rendezvous for its whole timeout.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from gmitest import FAST, compose_config, gmiexp_workers, popen_cli, run_cli

from gmiexp.launch.launcher import free_port
from gmiexp.planner.build import build_plan
from gmiexp.planner.nodes import disagreement, shared_fields

#: a long rendezvous timeout: a node that waited it out (the hang before the check) cannot pass for a quick refusal
BASE = [*FAST, "num_gpus=1", "launch.nnodes=2", "launch.rdzv_timeout_s=300", "max_iterations=2"]


def two_nodes(tmp_path: Path, node0: list[str], node1: list[str]) -> tuple[list[int], list[str], float]:
    """Both launchers, each with its own settings; their exit codes, their stderr, and how long they took."""
    ep = f"launch.rdzv_endpoint=127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    procs = [popen_cli(*BASE, ep, f"launch.node_rank={r}", *extra, f"hydra.run.dir={tmp_path}")
             for r, extra in ((0, node0), (1, node1))]
    errs = []
    for p in procs:
        try:
            errs.append(p.communicate(timeout=120)[1])
        except subprocess.TimeoutExpired:
            p.kill()
            errs.append(p.communicate()[1])
    assert not gmiexp_workers(tmp_path)
    return [p.returncode for p in procs], errs, time.monotonic() - t0


def node_plan(run_dir: Path, node: int, *extra: str) -> dict:
    """The fields node ``node`` would publish for the check (``shared_fields`` of the plan its launcher builds),
    planned in this process: ``python -m gmiexp mode=plan`` prints the same plan (its notes, which no node
    compares, aside), and a launch per node cost the suite seconds of CPU each."""
    cfg = compose_config(*BASE, *extra, "gmis_per_gpu=2", "mode=plan", "launch.rdzv_endpoint=10.0.0.1:29400",
                         f"launch.node_rank={node}")
    return shared_fields(build_plan(cfg, run_dir)[0])


@pytest.mark.parametrize(("node0", "node1", "expected"), [
    # one mismatch by default; the others take the same path (make test-slow)
    pytest.param(["num_envs=64"], ["num_envs=128"],
                 "num_envs per GMI: node 0 [64, 64, 64, 64], node 1 [128, 128, 128, 128]", marks=pytest.mark.slow),
    pytest.param(["max_iterations=5"], ["max_iterations=8"], "max_iterations: node 0 5, node 1 8",
                 marks=pytest.mark.slow),
    (["gmis_per_gpu=2"], ["gmis_per_gpu=1"],
     "GMIs (world size): node 0 4, node 1 2; GMIs per GPU (gmis_per_gpu): node 0 [2], node 1 [1]; "
     "num_envs per GMI: node 0 [32, 32, 32, 32], node 1 [32, 32]"),
], ids=["num_envs", "max_iterations", "gmis_per_gpu"])
def test_nodes_with_different_settings_exit_2_naming_them(node0: list[str], node1: list[str], expected: str,
                                                           tmp_path: Path, no_orphans: None) -> None:
    codes, errs, took = two_nodes(tmp_path, ["gmis_per_gpu=2", *node0], ["gmis_per_gpu=2", *node1])
    assert codes == [2, 2], errs
    for node, err in enumerate(errs):
        line = err.strip().splitlines()[-1]
        assert line.startswith(f"gmiexp: error: invalid settings across nodes: node {node}'s plan differs"), err
        assert line.endswith(expected), line  # the differing settings only, each once
    assert not list(tmp_path.glob("node*/gmis/*/status.json"))  # no GMI started
    # seconds after both launchers are up (their start-up alone takes a minute on a loaded 2-core host)
    assert took < 120, took


def test_only_the_differing_fields_are_named(tmp_path: Path) -> None:
    plans = {r: node_plan(tmp_path / str(r), r, *extra)
             for r, extra in ((0, ["max_iterations=5"]), (1, ["max_iterations=8", "train.gamma=0.9"]))}
    assert disagreement(plans) == ["max_iterations: node 0 5, node 1 8", "train.gamma: node 0 0.99, node 1 0.9"]
    assert disagreement({0: plans[0], 1: dict(plans[0])}) == []


# slow: the default suite keeps this case with each of these assertions
# (tests/launch/test_faults.py::test_node_1_with_nothing_on_the_port_says_so_without_cpp_frames)
@pytest.mark.slow
def test_node_1_alone_says_one_line_and_logs_the_c10d_noise(tmp_path: Path) -> None:
    r = run_cli(*BASE, "gmis_per_gpu=1", f"launch.rdzv_endpoint=127.0.0.1:{free_port()}", "launch.node_rank=1",
                "launch.rdzv_timeout_s=2", f"hydra.run.dir={tmp_path}", timeout=120)
    assert r.returncode != 0
    assert "node 1 cannot reach node 0's store" in r.stderr, r.stderr
    assert not re.search(r"^frame #\d+|socket\.cpp|TCPStore\.cpp", r.stderr, re.M), r.stderr
    # nothing listens: the launcher waits for a listener itself, so torch's client never retries with C++ frames
    assert "Connection refused" in r.stderr


def test_a_nodes_own_launcher_settings_may_differ(tmp_path: Path) -> None:
    plans = {r: node_plan(tmp_path / str(r), r, *extra)
             for r, extra in ((0, []), (1, ["launch.monitor_interval_s=4", "launch.progress=false",
                                            "launch.rdzv_timeout_s=9", "launch.local_addr=10.0.0.2",
                                            "hardware.cpu_cores=3"]))}
    assert disagreement(plans) == []
