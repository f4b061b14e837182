"""Warm starts: GMIs forked from a server that imported torch and rl-games once, indistinguishable from spawned ones."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from gmitest import FAST, cli_env, popen_cli, run_cli

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


def set_by_importing_the_runtime(tmp_path: Path) -> dict[str, str]:
    """The variables the server's preloads set in the process that imports them (gymnasium's
    ``PYGAME_HIDE_SUPPORT_PROMPT``, inductor's cache dir, ...): a GMI that imports them has them, whether the
    server imported them before the fork or the GMI does itself; the test's role imports none of them."""
    from gmitest import compose_config

    from gmiexp.planner.build import build_plan

    plan, _ = build_plan(compose_config("role=user_roles:ProcessRole", "gmis_per_gpu=2", *FAST), tmp_path)
    probe = ("import importlib, json, os, sys; before = dict(os.environ); "
             f"[importlib.import_module(m) for m in {warm.preloads(plan)!r}]; "
             "sys.stderr.write(json.dumps({k: v for k, v in os.environ.items() if before.get(k) != v}))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=cli_env())
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stderr.splitlines()[-1])


def test_a_warm_gmi_sees_what_a_cold_one_sees(tmp_path: Path) -> None:
    """Environment (set after the server started too), cwd, cores, signals and command line, as a spawned GMI's."""
    hot, cold = processes(tmp_path / "warm", True), processes(tmp_path / "cold", False)
    imported = set_by_importing_the_runtime(tmp_path / "plan")
    for g in (0, 1):
        w, c = hot[g], cold[g]
        assert {k: w["env"][k] for k in imported} == imported  # as the imports set them, nothing else
        w["env"] = {k: v for k, v in w["env"].items() if k not in imported}
        c["env"] = {k: v for k, v in c["env"].items() if k not in imported}
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
        assert "rl_games" not in " ".join(w["parent_cmdline"])  # and no trainer this role does not use
        assert "rlgames" not in " ".join(w["parent_cmdline"])
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


@pytest.mark.parametrize(("args", "trainer"), [
    ((), "gmiexp.rl.rlgames.ppo_role"),  # rl-games' PPO (tcg_ex)
    (("train=rslrl",), "gmiexp.rl.rslrl.role"),
    (("layout=tdg_ex",), "gmiexp.rl.experience.roles"),
    # a user's module is imported in its GMIs only; the gmiexp roles it derives from in the server
    (("role=user_roles:ProcessRole",), "gmiexp.role"),
    (("layout=tdg_ex", "role=pixel_sim:PixelTDGEX"), "gmiexp.rl.experience.roles"),
])
def test_the_server_imports_the_runs_own_trainer(args: tuple[str, ...], trainer: str, tmp_path: Path) -> None:
    """Torch and the worker, the role's gmiexp modules, the simulator's modules: nothing else."""
    from gmitest import compose_config

    from gmiexp.envs import simulator
    from gmiexp.planner.build import build_plan

    plan, _ = build_plan(compose_config(*FAST, *args), tmp_path)
    expected = [trainer, "gmiexp.role"] if trainer != "gmiexp.role" and ":" in plan.role else [trainer]
    assert warm.preloads(plan) == [warm.PRELOAD, *expected, *simulator(plan.task).warm]


def test_a_role_registered_from_a_users_module_is_not_imported_by_the_server() -> None:
    from gmiexp.role import ROLES, Role

    class Mine(Role):
        def run(self) -> None:
            return None

    ROLES.register("mine_for_test")(Mine)
    try:
        assert warm.role_modules("mine_for_test") == ["gmiexp.role"]  # its gmiexp base, not this test module
    finally:
        ROLES.unregister("mine_for_test")


def test_mjlab_gmis_fork_with_mjlab_s_tasks_imported(tmp_path: Path) -> None:
    """Registering mjlab's tasks takes seconds: the server does it once, not each GMI."""
    pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")
    from gmitest import compose_config

    from gmiexp.planner.build import build_plan

    plan, _ = build_plan(compose_config("train=rslrl", "task=Mjlab-Cartpole-Balance", "batch.total_envs=8",
                                        "gmis_per_gpu=2"), tmp_path)
    assert warm.enabled(plan)
    assert warm.preloads(plan) == [warm.PRELOAD, "gmiexp.rl.rslrl.role", "mjlab.tasks", "gmiexp.envs.mjlab_env"]


IMPORT_IS_FORK_SAFE = """
import importlib, json, sys, threading
import torch
for m in sys.argv[1:]:
    importlib.import_module(m)
warp = sys.modules.get("warp._src.context") or sys.modules.get("warp.context")
print(json.dumps({"threads": [t.name for t in threading.enumerate()], "cuda": torch.cuda.is_initialized(),
                  "warp_runtime": getattr(warp, "runtime", None) is not None}))
"""


SIMULATOR_NAMES = ("envpool", "gymnasium", "torch", "mjlab")


def warm_modules(name: str) -> list[str]:
    from gmiexp.envs import SIMULATORS

    return [*SIMULATORS.get(name)().warm]


@pytest.fixture(scope="module")
def imported_together() -> tuple[list[str], dict]:
    """Every simulator's warm modules (mjlab's where it is installed) imported after torch in one interpreter, and
    what it then holds: a thread, a CUDA context or a Warp runtime that any of them started shows there as in an
    interpreter of its own, and Python and torch start once instead of once per simulator (seconds of CPU each)."""
    names = [n for n in SIMULATOR_NAMES if n != "mjlab" or importlib.util.find_spec("mjlab") is not None]
    modules = [m for n in names for m in warm_modules(n)]
    r = subprocess.run([sys.executable, "-c", IMPORT_IS_FORK_SAFE, *modules], capture_output=True, text=True,
                       timeout=240, env=cli_env())
    assert r.returncode == 0, r.stderr[-3000:]
    return modules, json.loads(r.stdout.splitlines()[-1])


@pytest.mark.parametrize("name", SIMULATOR_NAMES)
def test_a_simulators_warm_modules_start_nothing_a_fork_would_break(
        name: str, imported_together: tuple[list[str], dict]) -> None:
    """The server forks every GMI after importing these: no thread, no CUDA context, no Warp runtime may exist."""
    if name == "mjlab" and importlib.util.find_spec("mjlab") is None:
        pytest.skip("needs gmiexp[mjlab] (make venv installs it)")
    modules = warm_modules(name)
    together, state = imported_together
    assert set(modules) <= set(together), (modules, together)
    assert state == {"threads": ["MainThread"], "cuda": False, "warp_runtime": False}, together


SERVER_EXIT = """
import os, sys
import gmiexp.launch.preload

class Teardown:
    def __del__(self):
        sys.stderr.write("torn down\\n")

kept = Teardown()
pid = os.fork()
if pid == 0:  # a child of the server (a GMI, were it forked by it): its own exit, its own code
    sys.exit(3)
_, status = os.waitpid(pid, 0)
sys.stderr.write(f"child exit {os.waitstatus_to_exitcode(status)}\\n")
"""


def test_the_server_leaves_without_tearing_down_what_it_imported() -> None:
    """Its exit skips the interpreter's teardown (seconds of CPU after its launcher exited); a child it forked
    still exits with its own code and tears down as usual."""
    r = subprocess.run([sys.executable, "-c", SERVER_EXIT], capture_output=True, text=True, timeout=120,
                       env=cli_env())
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stderr.splitlines()
    assert "child exit 3" in lines, r.stderr[-3000:]
    assert lines.count("torn down") == 1, r.stderr[-3000:]  # the child's; not the server's


LAUNCHER_MODULES = """
import atexit, sys
from gmiexp.__main__ import main
if __name__ == "__main__":  # the GMIs' server imports this file as __mp_main__: only the launcher runs main
    atexit.register(lambda: print("launcher imported:", sorted(sys.modules), file=sys.stderr, flush=True))
    main()
"""


def test_the_launcher_leaves_rl_games_to_the_gmis_server(tmp_path: Path) -> None:
    """rl-games' agents and networks (with the ``torch._dynamo`` its test network's ``torch.compile`` imports) take
    seconds to import: the server imports them while the launcher sets up, so the launcher must not import them
    first on its way to starting the server (rl-games' checkpoint helpers, ``torch_ext``, are cheap)."""
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER_MODULES)
    r = subprocess.run([sys.executable, str(script), *FAST, "max_iterations=1", f"hydra.run.dir={tmp_path / 'run'}"],
                       capture_output=True, text=True, timeout=240, env=cli_env())
    assert r.returncode == 0 and r.stdout.startswith("gmiexp ok:"), r.stderr[-3000:]
    line = next(x for x in r.stderr.splitlines() if x.startswith("launcher imported:"))
    assert "'torch'" in line, line
    for heavy in ("rl_games.common.a2c_common", "rl_games.envs", "torch._dynamo"):
        assert f"'{heavy}'" not in line, heavy
