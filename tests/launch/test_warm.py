"""Warm starts: GMIs forked from a server that imported torch and rl-games once, indistinguishable from spawned ones."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from gmitest import FAST, popen_cli, run_cli

from gmiexp.launch import warm
from gmiexp.status import read_status

#: what differs between two runs whatever their start: the run's own ids, ports and directory
PER_RUN = {"TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "MASTER_PORT", "GMIEXP_RUN_TAG", "GMIEXP_LAUNCHER"}


def processes(run_dir: Path, start: bool) -> dict[int, dict]:
    r = run_cli("role=user_roles:ProcessRole", "gmis_per_gpu=2", *FAST, f"launch.warm_start={str(start).lower()}",
                f"hydra.run.dir={run_dir}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("gmiexp ok:") and len(r.stdout.splitlines()) == 1, r.stdout  # nothing else on stdout
    found = {}
    for p in run_dir.glob("process_*.json"):
        found[int(p.name.split("_")[1])] = json.loads(p.read_text().replace(str(run_dir), "<run>"))
    assert sorted(found) == [0, 1]
    return found


def test_a_warm_gmi_sees_what_a_cold_one_sees(tmp_path: Path) -> None:
    """Environment (set after the server started too), cwd, cores, signals and command line, as a spawned GMI's."""
    hot, cold = processes(tmp_path / "warm", True), processes(tmp_path / "cold", False)
    for g in (0, 1):
        w, c = hot[g], cold[g]
        assert set(w["env"]) == set(c["env"]), set(w["env"]) ^ set(c["env"])
        assert {k: v for k, v in w["env"].items() if k not in PER_RUN} == \
            {k: v for k, v in c["env"].items() if k not in PER_RUN}
        assert w["env"]["GMIEXP_RUN_TAG"] and w["env"]["GMIEXP_LAUNCHER"]  # set by the launcher after the server
        assert w["env"]["LOCAL_RANK"] == str(g) and w["env"]["WORLD_SIZE"] == "2"
        for key in ("cwd", "cpus", "sigterm", "sigint", "blocked", "torch_threads"):
            assert w[key] == c[key], key
        assert " ".join(w["cmdline"]).split() == c["cmdline"]  # ps shows the worker as it always did
        assert "multiprocessing.forkserver" in " ".join(w["parent_cmdline"])  # forked from the server ...
        assert warm.PRELOAD in " ".join(w["parent_cmdline"])  # ... which imported the runtime first
        assert "multiprocessing.forkserver" not in " ".join(c["parent_cmdline"])  # spawned by the launcher
        assert w["line_buffered"]
    assert hot[0]["ppid"] == hot[1]["ppid"]


def test_killing_the_launcher_of_warm_gmis_takes_the_server_and_the_gmis(tmp_path: Path) -> None:
    """The server exits with its launcher (the GMIs do not hold its lifeline open), and the GMIs follow it."""
    p = popen_cli("role=user_roles:SleepRole", "gmis_per_gpu=2", *FAST, f"hydra.run.dir={tmp_path}")
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not all((read_status(tmp_path, g) or {}).get("stage") == "sleeping"
                                                 for g in (0, 1)):
            time.sleep(0.2)
        pids = [int((read_status(tmp_path, g) or {})["pid"]) for g in (0, 1)]
        server = psutil.Process(pids[0]).ppid()
        assert server != p.pid and warm.PRELOAD in " ".join(psutil.Process(server).cmdline())
        os.kill(p.pid, signal.SIGKILL)  # and not reaped yet: a zombie launcher is a dead one
        gone = time.time() + 10
        while time.time() < gone and any(psutil.pid_exists(x) for x in (server, *pids)):
            time.sleep(0.1)
        assert not any(psutil.pid_exists(x) for x in (server, *pids))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("start", [True, False])
def test_launch_warm_start_picks_the_start_method(start: bool, tmp_path: Path) -> None:
    from gmitest import compose_config

    from gmiexp.planner.build import build_plan

    cfg = compose_config(*FAST, f"launch.warm_start={str(start).lower()}")
    plan, _ = build_plan(cfg, tmp_path)
    assert warm.enabled(plan) is start
