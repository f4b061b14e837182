"""Life of an MPS control daemon: start, check it serves, quit exactly once.

Everything goes through ``control()``, one call of ``nvidia-cuda-mps-control``
with the daemon's pipe and log directories in its environment, so tests run
the same code against a fake executable on PATH. The documented facts used:
``-d`` daemonises and writes ``nvidia-cuda-mps-control.pid`` into
CUDA_MPS_PIPE_DIRECTORY; commands (``get_server_list``, ``quit``) are read on
stdin; CUDA silently runs without MPS when no daemon answers, hence the check.
``python -m gmiexp.backends.mps_daemon quit '<daemons as JSON>'`` quits private
daemons from a process of its own (:func:`quit_detached`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gmiexp.errors import ConfigError, LaunchError, invalid

CONTROL = "nvidia-cuda-mps-control"
PID_FILE = "nvidia-cuda-mps-control.pid"
SYSTEM_PIPE_DIR = "/tmp/nvidia-mps"
SYSTEM_LOG_DIR = "/var/log/nvidia-mps"
START_TIMEOUT_S = 10.0  # -d to a live pid file
QUIT_TIMEOUT_S = 10.0  # quit to the pid file gone, before SIGTERM
MAX_PIPE_DIR_LEN = 80  # the daemon's UNIX sockets live here; sun_path holds 107 bytes
# private: started and quit by this run; shared: one per host, user and GPU set, started by the first
# concurrent gmiexp run and quit by the last (packed sweep members share one MPS server); existing:
# a daemon someone else runs (e.g. the system's), checked to serve, never started nor quit
DAEMON_MODES = ("private", "shared", "existing")


class MPSError(LaunchError):
    """The daemon did not start or serve as documented (exit code 1, nothing launched)."""


@dataclass
class Daemon:
    """One control daemon: where its pipes and logs live, and which devices it sees."""

    pipe_dir: str
    log_dir: str
    visible: str | None = None  # CUDA_VISIBLE_DEVICES of the daemon; None = every GPU (no remapping)
    owned_pipe_dir: bool = False  # pipe dir outside the run dir, created (and removed) by gmiexp
    mode: str = "private"  # private | shared | existing (see DAEMON_MODES)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("CUDA_VISIBLE_DEVICES", None)
        if self.visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.visible
        env["CUDA_MPS_PIPE_DIRECTORY"] = self.pipe_dir
        env["CUDA_MPS_LOG_DIRECTORY"] = self.log_dir
        return env

    def client_env(self) -> dict[str, str]:
        return {"CUDA_MPS_PIPE_DIRECTORY": self.pipe_dir, "CUDA_MPS_LOG_DIRECTORY": self.log_dir}

    def start_command(self) -> str:
        vis = f"CUDA_VISIBLE_DEVICES={shlex.quote(self.visible)} " if self.visible is not None else ""
        return (f"mkdir -p {shlex.quote(self.pipe_dir)} {shlex.quote(self.log_dir)} && {vis}"
                f"CUDA_MPS_PIPE_DIRECTORY={shlex.quote(self.pipe_dir)} "
                f"CUDA_MPS_LOG_DIRECTORY={shlex.quote(self.log_dir)} {CONTROL} -d")

    def quit_command(self) -> str:
        return f"echo quit | CUDA_MPS_PIPE_DIRECTORY={shlex.quote(self.pipe_dir)} {CONTROL}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def private_daemon(run_dir: Path, name: str = "mps", visible: str | None = None) -> Daemon:
    """A daemon private to this run: logs in the run dir; pipes there too unless the path is too long."""
    base = Path(run_dir).absolute() / name
    pipe = str(base / "pipe")
    owned = False
    if len(pipe) > MAX_PIPE_DIR_LEN:
        digest = hashlib.sha1(str(base).encode()).hexdigest()[:10]
        pipe = str(Path(tempfile.gettempdir()) / f"gmiexp-mps-{os.getuid()}-{digest}")
        owned = True
    return Daemon(pipe_dir=pipe, log_dir=str(base / "log"), visible=visible, owned_pipe_dir=owned)


def existing_daemon() -> Daemon:
    """The daemon a user already runs: CUDA_MPS_PIPE_DIRECTORY, else the system default."""
    return Daemon(pipe_dir=os.environ.get("CUDA_MPS_PIPE_DIRECTORY", SYSTEM_PIPE_DIR),
                  log_dir=os.environ.get("CUDA_MPS_LOG_DIRECTORY", SYSTEM_LOG_DIR), mode="existing")


def shared_daemon(visible: str | None) -> Daemon:
    """The daemon this user's concurrent runs on the GPU set ``visible`` share (outside any run dir).

    The directory is named by user and GPU set, so runs on GPU 0 meet one daemon and runs on GPU 1
    another; it also holds the lock and the holders' references (:mod:`gmiexp.backends.mps_shared`).
    """
    digest = hashlib.sha1((visible or "all").encode()).hexdigest()[:10]
    root = Path(tempfile.gettempdir()) / f"gmiexp-mps-{os.getuid()}-shared-{digest}"
    return Daemon(pipe_dir=str(root / "pipe"), log_dir=str(root / "log"), visible=visible, mode="shared")


def for_mode(mode: str, run_dir: Path, visible: str | None, name: str = "mps",
             private_visible: str | None = None) -> Daemon:
    """The daemon of ``backend.daemon=mode`` (ConfigError naming the valid modes otherwise)."""
    if mode == "private":
        return private_daemon(run_dir, name=name, visible=private_visible)
    if mode == "shared":
        return shared_daemon(visible)
    if mode == "existing":
        return existing_daemon()
    raise invalid("backend.daemon", mode, DAEMON_MODES)


def control(daemon: Daemon, *args: str, stdin: str | None = None,
            timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run ``nvidia-cuda-mps-control`` once against ``daemon`` (the only call of the tool)."""
    exe = shutil.which(CONTROL)
    if exe is None:
        raise ConfigError(f"{CONTROL} is not on PATH; install the NVIDIA driver utilities "
                          "or use backend=direct")
    return subprocess.run([exe, *args], input=stdin, env=daemon.env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def pid_of(pipe_dir: str) -> int | None:
    """PID in the daemon's pid file if that process is alive, else None."""
    try:
        pid = int(Path(pipe_dir, PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # a root-owned system daemon is alive
        return pid
    return pid


def is_serving(daemon: Daemon) -> bool:
    """The daemon's pid is alive and it answers ``get_server_list``."""
    if pid_of(daemon.pipe_dir) is None:
        return False
    return control(daemon, stdin="get_server_list\n", timeout=10.0).returncode == 0


def _wait(cond: Any, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return bool(cond())


def start(daemon: Daemon, timeout: float | None = None) -> None:
    """``-d`` then wait for the pid file and a served ``get_server_list``; MPSError otherwise."""
    timeout = START_TIMEOUT_S if timeout is None else timeout
    Path(daemon.pipe_dir).mkdir(parents=True, exist_ok=True)
    Path(daemon.log_dir).mkdir(parents=True, exist_ok=True)
    if pid_of(daemon.pipe_dir) is not None:
        raise MPSError(f"an MPS control daemon already runs with pipe dir {daemon.pipe_dir}")
    res = control(daemon, "-d", timeout=max(timeout, 5.0))
    if res.returncode != 0:
        raise MPSError(f"{CONTROL} -d failed (exit {res.returncode}): {(res.stderr or res.stdout).strip()}")
    if not _wait(lambda: pid_of(daemon.pipe_dir) is not None, timeout):
        raise MPSError(f"{CONTROL} -d wrote no live {PID_FILE} in {daemon.pipe_dir} within {timeout:.0f}s; "
                       f"see {daemon.log_dir}/control.log")
    if not is_serving(daemon):
        raise MPSError(f"the MPS daemon at {daemon.pipe_dir} does not answer get_server_list; "
                       f"see {daemon.log_dir}/control.log")


def quit_daemon(daemon: Daemon, timeout: float | None = None) -> None:
    """Send ``quit`` once, wait for the pid file to go; SIGTERM the daemon's pid as a last resort."""
    timeout = QUIT_TIMEOUT_S if timeout is None else timeout
    pid = pid_of(daemon.pipe_dir)
    try:
        control(daemon, stdin="quit\n", timeout=max(timeout, 5.0))
    except subprocess.TimeoutExpired:
        pass  # a hung control client: the SIGTERM below still ends the daemon
    finally:
        if pid is not None and not _wait(lambda: pid_of(daemon.pipe_dir) is None, timeout):
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
            _wait(lambda: pid_of(daemon.pipe_dir) is None, timeout)
        if daemon.owned_pipe_dir:
            shutil.rmtree(daemon.pipe_dir, ignore_errors=True)


def check_existing(d: Daemon) -> None:
    """``backend.daemon=existing``: someone else's daemon must already serve (CUDA would silently not use it)."""
    if not is_serving(d):
        raise ConfigError(
            f"backend.daemon=existing but no MPS control daemon serves at {d.pipe_dir}; start one "
            f"({CONTROL} -d, with CUDA_MPS_PIPE_DIRECTORY set if it is not {SYSTEM_PIPE_DIR}) or choose "
            f"backend.daemon from {', '.join(DAEMON_MODES)} (private: this run starts its own; shared: "
            "one daemon for this user's concurrent runs)")


def quit_private(d: Daemon) -> None:
    """Quit a private daemon if it runs; remove a pipe dir gmiexp created either way."""
    if d.mode != "private":
        raise MPSError(f"refusing to quit the {d.mode} MPS daemon at {d.pipe_dir} as a private one")
    if pid_of(d.pipe_dir) is not None:
        quit_daemon(d)
    elif d.owned_pipe_dir:
        shutil.rmtree(d.pipe_dir, ignore_errors=True)


def quit_detached(daemons: list[Daemon]) -> subprocess.Popen[bytes] | None:
    """Quit private ``daemons`` from a new session that outlives the caller (None when there are none).

    For a GMI whose launcher was killed: the GMI is itself a client, and a daemon told to quit
    exits only once its clients are gone, so the GMI cannot wait for it; the new process sends
    ``quit`` and waits as :func:`quit_daemon` does while the GMIs exit. Shared and existing
    daemons are never passed (the first is its next user's to quit, the second nobody's).
    """
    daemons = [d for d in daemons if d.mode == "private"]
    if not daemons:
        return None
    log = Path(daemons[0].log_dir) / "quit-after-launcher-died.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", __name__, "quit", json.dumps([d.to_dict() for d in daemons])],
            stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True)


def main(argv: list[str] | None = None) -> int:
    """``quit '<JSON list of private daemons>'``: what :func:`quit_detached` runs."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "quit":
        print("usage: python -m gmiexp.backends.mps_daemon quit '<JSON list of daemons>'", file=sys.stderr)
        return 2
    for d in json.loads(argv[1]):
        quit_private(Daemon(**d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
