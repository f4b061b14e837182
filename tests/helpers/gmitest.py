"""Test helpers: run the CLI in a subprocess, compose configs in-process, find leftover GMI processes."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

import psutil
import pytest

from gmiexp.app import run
from gmiexp.config.compose import compose_config

TESTS_DIR = Path(__file__).resolve().parents[1]
#: group options that need another key to compose (their required field)
NEEDS = {("train", "rlgames"): ["train.file=rl_games:configs/mujoco/ant_envpool.yaml"],
         ("pbt", "rlgames"): ["train=rlgames", f"train.file={TESTS_DIR / 'config/fixtures/pbt/ant_envpool_pbt.yaml'}"]}
FAST = ["task=Cartpole", "num_envs=32", "launch.progress=false", "train.horizon_length=16",
        "train.minibatch_size=256", "train.mini_epochs=2"]


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR / "helpers"), env.get("PYTHONPATH", "")])
    env["WANDB_MODE"] = "offline"
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


#: a test that mounts in a private mount namespace (a small tmpfs over /dev/shm or a run dir, gone with it)
needs_unshare = pytest.mark.skipif(not _can_unshare(), reason="needs unshare -m (root or user namespaces)")


def in_namespace(script: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``script`` (sh) in a private mount namespace, where mounts vanish with it."""
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=timeout,
                          env=cli_env())


def gmiexp_cmd(*args: str) -> str:
    """``python -m gmiexp args`` as one shell word list (for :func:`in_namespace`)."""
    return shlex.join([sys.executable, "-m", "gmiexp", *args])


def fresh_caches(root: Path) -> dict[str, str]:
    """Environment pointing every cache a first run fills (matplotlib's font cache, XDG, W&B) at empty dirs."""
    names = {"MPLCONFIGDIR": "mpl", "XDG_CACHE_HOME": "cache", "XDG_CONFIG_HOME": "config",
             "WANDB_CACHE_DIR": "wandb-cache", "WANDB_CONFIG_DIR": "wandb-config"}
    for sub in names.values():
        (root / sub).mkdir(parents=True, exist_ok=True)
    return {k: str(root / sub) for k, sub in names.items()}


def run_cli(*args: str, timeout: float = 240, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m gmiexp args`` with the test helpers importable (user roles); ``env`` adds variables."""
    return subprocess.run([sys.executable, "-m", "gmiexp", *args], capture_output=True, text=True,
                          timeout=timeout, env={**cli_env(), **(env or {})})


def run_here(capsys: pytest.CaptureFixture[str], run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    """The job ``python -m gmiexp overrides`` runs, in this process: its exit code, stdout and stderr (``capsys``).

    A launch costs 3-4 s of CPU before it refuses anything: what only reads a refusal or a plan runs here, and each
    error path keeps one real launch (docs/development.md, "Suite time from a fresh clone").
    """
    capsys.readouterr()
    cores = os.sched_getaffinity(0)
    try:
        code = run(compose_config(*overrides), run_dir)
    finally:  # a job narrows its own process's cores (hardware.cpus): this one's later tests and children keep all
        os.sched_setaffinity(0, cores)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(overrides), code, out.out, out.err)


def terminal_signals() -> None:
    """In the child: SIGINT as a terminal's foreground job has it (a suite started with ``&`` by a script inherits
    it ignored, and Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def popen_cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gmiexp", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(), start_new_session=True,
                            preexec_fn=terminal_signals)


def fake_python(tmp_path: Path, source: str) -> str:
    """An executable standing in for ``python``: whatever it is asked to run, it runs ``source`` instead."""
    script = tmp_path / "fake_python.py"
    script.write_text(source)
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


def descendants_alive(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if p.is_running()]
    except psutil.NoSuchProcess:
        return []


class StopClock:
    """Seconds from :meth:`start` until every process in ``pids`` is gone (dead or a zombie), timed on a thread
    while the test drains its launchers' pipes: "every GMI stopped within 10 s" is about the GMIs, not about how
    long a launcher then takes to write its summary and exit (seconds more on a slow host)."""

    def __init__(self, pids: Iterable[int], timeout: float = 60) -> None:
        self.procs = [psutil.Process(p) for p in pids]
        self.timeout = timeout
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = self._t1 = 0.0

    def start(self) -> StopClock:
        self._t0 = time.time()
        self._thread.start()
        return self

    def _run(self) -> None:
        while time.time() < self._t0 + self.timeout:
            if not any(_alive(p) for p in self.procs):
                self._t1 = time.time()
                return
            time.sleep(0.05)

    def elapsed(self) -> float:
        """Seconds until the last one was gone (inf if one outlived ``timeout``)."""
        self._thread.join()
        return self._t1 - self._t0 if self._t1 else float("inf")


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def gmiexp_workers(run_dir: Path) -> list[psutil.Process]:
    """GMI worker processes of the run in ``run_dir`` still alive (their command line names its plan)."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if "gmiexp.launch.worker" in cmd and str(run_dir) in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
            out.append(p)
    return out


def processes_naming(path: Path) -> list[psutil.Process]:
    """Live processes whose command line names ``path``: a run's launcher and GMIs, a sweep's or population's."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if str(path) in " ".join(p.info.get("cmdline") or []) and p.info["status"] != psutil.STATUS_ZOMBIE:
            out.append(p)
    return out


def slow_where(names: Iterable[str], slow: Collection[str]) -> list:
    """Parametrize values with those in ``slow`` marked ``slow`` (a path a default case also takes)."""
    return [pytest.param(n, marks=pytest.mark.slow) if n in slow else n for n in names]


def spawn_gmis(target: Callable[..., None], world: int, args: Callable[[int, int], tuple], out: Path,
               timeout: float = 240) -> list[dict]:
    """Run ``target(rank, *args(rank, port))`` in ``world`` spawned processes (one GMI each, a fresh gloo port).

    Each writes ``out/<rank>.pt``; all must exit 0. Returns what they wrote, by rank.
    """
    import multiprocessing as mp

    import torch

    from gmiexp.launch.launcher import free_port

    ctx = mp.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, *args(r, port)), daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(timeout)
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    return [torch.load(out / f"{r}.pt", weights_only=False) for r in range(world)]
