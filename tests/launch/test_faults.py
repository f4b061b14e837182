"""The fault campaign: each fault ends in one ``gmiexp: error:`` line with its exit code, leaves no process or
segment behind, and loses nothing a resume needs (docs/faults.md lists them all, with the tests of the faults that
were handled before: kill -9 of a GMI or a launcher, a truncated checkpoint, SIGTERM/SIGINT, a busy port).

/dev/shm too small, a full disk and a read-only run dir are made in a private mount namespace (``unshare -m``,
root): a small tmpfs over ``/dev/shm`` or over the run dir, gone with the namespace.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch
from gmitest import FAST, compose_config, gmiexp_cmd, in_namespace, needs_unshare, popen_cli, run_cli

from gmiexp.launch.requeue import latest_checkpoint
from gmiexp.launch.watchdog import Watchdog
from gmiexp.rl.rlgames import checkpoint
from gmiexp.status import read_status

ONE = ["num_gpus=1", "gmis_per_gpu=1"]


def wait_for(pred, timeout: float) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.2)
    return False


def wait_stage(run_dir: Path, gmi: int, stage: str, timeout: float = 120, iteration: int = 0) -> dict:
    def ok() -> bool:
        s = read_status(run_dir, gmi) or {}
        return s.get("stage") == stage and int(s.get("iteration", 0)) >= iteration

    assert wait_for(ok, timeout), f"GMI {gmi} never reached {stage!r}: {read_status(run_dir, gmi)}"
    return read_status(run_dir, gmi) or {}


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gmiexp: error:")]


# ---- 1. /dev/shm too small -------------------------------------------------------------------------------------
@needs_unshare
def test_dev_shm_too_small_is_refused_before_launch_naming_need_free_and_fixes(tmp_path: Path,
                                                                               no_orphans: None) -> None:
    r = in_namespace("mount -t tmpfs -o size=2m tmpfs /dev/shm && " + gmiexp_cmd(
        "layout=tdg_ex", "reduction=mpr", *FAST, "num_envs=64", "num_gpus=1", "gmis_per_gpu=4",
        "max_iterations=300", f"hydra.run.dir={tmp_path}"))  # before: SIGBUS (exit -7) once the rings filled 2 MiB
    assert r.returncode == 2, r.stderr[-3000:]
    (line,) = error_lines(r.stderr)
    assert "/dev/shm has 2.0 MiB free" in line and "this plan needs about /dev/shm:" in line
    assert "--shm-size" in line and "channel.slots" in line
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "gmis").exists()  # nothing started


@needs_unshare
def test_a_segment_too_big_for_dev_shm_fails_at_creation_not_with_a_later_sigbus() -> None:
    code = ("from gmiexp.shm import segment\n"
            "seg = segment.create('gmiexp_tfaults_big', 4 << 20)\n"
            "seg.buf[(4 << 20) - 1] = 1\n"  # the last page: tmpfs cannot supply it
            "print('written')\n")
    r = in_namespace("mount -t tmpfs -o size=2m tmpfs /dev/shm && " + shlex.join([sys.executable, "-c", code]))
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])  # not -7 (SIGBUS)
    assert "ShmFull" in r.stderr and "too little for a 4.0 MiB shared-memory segment" in r.stderr
    assert "--shm-size" in r.stderr


def test_a_sigbus_in_a_gmi_is_named_as_dev_shm_running_out(tmp_path: Path, no_orphans: None) -> None:
    p = popen_cli("role=user_roles:SleepRole", "num_gpus=1", "gmis_per_gpu=2", *FAST, f"hydra.run.dir={tmp_path}")
    try:
        pid = int(wait_stage(tmp_path, 1, "sleeping")["pid"])
        psutil.Process(pid).send_signal(signal.SIGBUS)
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 1, err[-2000:]
    assert "GMI 1 failed (exit code -7" in error_lines(err)[0] and "bus error: /dev/shm ran out" in err


# ---- 2. disk full, read-only run dir ---------------------------------------------------------------------------
@needs_unshare
def test_a_run_dir_too_small_is_refused_before_launch(tmp_path: Path, no_orphans: None) -> None:
    run = tmp_path / "small"
    run.mkdir()
    r = in_namespace(f"mount -t tmpfs -o size=1m tmpfs {run} && " + gmiexp_cmd(
        *FAST, *ONE, "train.save_frequency=1", "max_iterations=50", f"hydra.run.dir={run}/run"))
    assert r.returncode == 2, r.stderr[-3000:]
    (line,) = error_lines(r.stderr)
    assert f"run directory {run}/run has" in line and "this run will write about" in line
    assert "train.save_frequency=0" in line and "Traceback" not in r.stderr


@needs_unshare
def test_a_read_only_run_dir_exits_2_in_one_line(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    r = in_namespace(f"mount -t tmpfs -o size=1m,ro tmpfs {ro} && " + gmiexp_cmd(
        *FAST, *ONE, "max_iterations=2", f"hydra.run.dir={ro}/run"), timeout=120)
    assert r.returncode == 2, r.stderr[-3000:]
    assert error_lines(r.stderr) == [f"gmiexp: error: invalid hydra.run.dir={ro}/run: {ro} is on a read-only file "
                                     "system; valid: a writable place (hydra.run.dir=...)"]
    assert "Traceback" not in r.stderr


@pytest.mark.slow
@needs_unshare
def test_a_disk_that_fills_mid_run_ends_in_one_line_and_no_empty_summary(tmp_path: Path, no_orphans: None) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    run = disk / "run"
    script = f"""
mount -t tmpfs -o size=8m tmpfs {disk} || exit 99
{gmiexp_cmd(*FAST, *ONE, "max_iterations=400", f"hydra.run.dir={run}")} 2> {tmp_path}/err &
pid=$!
for i in $(seq 1 600); do grep -q '"iteration": [1-9]' {run}/gmis/0/status.json 2>/dev/null && break; sleep 0.2; done
dd if=/dev/zero of={disk}/filler bs=64k 2>/dev/null  # until the file system is full
wait $pid
echo "rc=$?"
ls -la {run} > {tmp_path}/ls
test -f {run}/summary.json && cp {run}/summary.json {tmp_path}/summary.json
"""
    r = in_namespace(script, timeout=300)
    err = (tmp_path / "err").read_text()
    assert "rc=1" in r.stdout, (r.stdout, err[-3000:])
    lines = error_lines(err)
    assert len(lines) == 1 and "full" in lines[0], err[-3000:]
    assert "app.py" not in err  # no traceback of the launcher's own
    summary = tmp_path / "summary.json"
    if summary.exists():  # written whole or not at all
        assert json.loads(summary.read_text())["status"] == "failed"


# ---- 3. a stopped GMI ------------------------------------------------------------------------------------------
def test_the_watchdog_names_the_gmi_that_fell_silent_first_and_kills_every_gmi(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(3)]
    try:
        now = time.time()
        statuses = [{"pid": p.pid, "stage": "training", "time": now - silent}
                    for p, silent in zip(procs, (21.0, 26.0, 0.1), strict=True)]  # GMI 1 went silent first
        dog = Watchdog(str(tmp_path), gmis=[0, 1, 2], total_frames=1, heartbeat_timeout_s=20.0, progress=False)
        dog._check_heartbeats(statuses, now - 60)
        assert dog.hang is not None and dog.hang.gmi == 1 and not dog.hang.stopped
        assert [g for g, _, _ in dog.hang.waiting] == [0]  # GMI 0 waits on it; GMI 2 still beats
        assert [p.wait(timeout=10) for p in procs] == [-9, -9, -9]  # all of them, with SIGKILL
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_stopped_gmi_is_the_culprit_even_when_a_peer_is_more_silent(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    try:
        procs[1].send_signal(signal.SIGSTOP)
        assert wait_for(lambda: psutil.Process(procs[1].pid).status() == psutil.STATUS_STOPPED, 10)
        now = time.time()
        statuses = [{"pid": procs[0].pid, "stage": "training", "time": now - 30},
                    {"pid": procs[1].pid, "stage": "training", "time": now - 25}]
        dog = Watchdog(str(tmp_path), gmis=[0, 1], total_frames=1, heartbeat_timeout_s=20.0, progress=False)
        dog._check_heartbeats(statuses, now - 60)
        assert dog.hang is not None and dog.hang.gmi == 1 and dog.hang.stopped
        assert "GMI 1 hung: no heartbeat for 25" in dog.hang.describe() and "SIGSTOP" in dog.hang.describe()
        assert [p.wait(timeout=10) for p in procs] == [-9, -9]  # a stopped process dies of SIGKILL too
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["tcg_ex", "tdg_ex"])
def test_a_sigstopped_gmi_is_named_and_everything_is_gone_within_10s_of_the_timeout(
        layout: str, tmp_path: Path, no_orphans: None) -> None:
    timeout = 20.0  # rl-games' start-up on a loaded 2-core host is silent for longer than 10 s
    extra = ["layout.trainers_per_gpu=1", "num_gpus=1", "gmis_per_gpu=2"] if layout == "tdg_ex" else \
        ["num_gpus=1", "gmis_per_gpu=2"]
    p = popen_cli(f"layout={layout}", *FAST, *extra, "max_iterations=100000",
                  f"launch.heartbeat_timeout_s={timeout:g}", f"hydra.run.dir={tmp_path}")
    try:
        victim = 1
        st = wait_stage(tmp_path, victim, "training" if layout == "tcg_ex" else "running", timeout=180)
        wait_for(lambda: int((read_status(tmp_path, 0) or {}).get("iteration", 0)) >= 2, 120)
        assert p.poll() is None, p.communicate()[1][-3000:]
        pids = [int((read_status(tmp_path, g) or {})["pid"]) for g in range(len(list((tmp_path / "gmis").iterdir())))]
        psutil.Process(int(st["pid"])).send_signal(signal.SIGSTOP)
        t0 = time.time()
        _out, err = p.communicate(timeout=timeout + 60)
        elapsed = time.time() - t0
    finally:
        if p.poll() is None:
            p.kill()
    print(f"{layout}: SIGSTOP of GMI 1 -> exit {p.returncode} after {elapsed:.1f}s (timeout {timeout:g}s)")
    assert p.returncode == 1, err[-3000:]
    (line,) = error_lines(err)
    assert f"GMI {victim} hung: no heartbeat" in line and "process stopped (SIGSTOP)" in line, line
    assert elapsed < timeout + 10 + 5, elapsed  # + 5: the watchdog's interval and this loaded machine
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid


# ---- 4. two runs in one directory ------------------------------------------------------------------------------
def test_a_second_run_in_a_busy_run_dir_exits_2_naming_the_first(tmp_path: Path, no_orphans: None,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from gmiexp.app import run

    first = popen_cli("role=user_roles:SleepRole", *ONE, *FAST, f"hydra.run.dir={tmp_path}")
    try:
        wait_stage(tmp_path, 0, "sleeping")
        # the second run in this process (gmiexp.app.run, what ``python -m gmiexp`` runs after Hydra composed the
        # config): the refusal comes before anything is planned or started, so a launcher's start-up of its own
        # (seconds of CPU) would add nothing; the first run is a process of its own that holds the run dir
        assert run(compose_config("role=user_roles:SleepRole", *ONE, *FAST), tmp_path) == 2
        err = capsys.readouterr().err
        (line,) = error_lines(err)
        assert f"another gmiexp run (pid {first.pid} on " in line and f"invalid run dir {tmp_path}" in line
        assert (read_status(tmp_path, 0) or {}).get("stage") == "sleeping"  # the first run's files untouched
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130
    from gmiexp.launch.ownership import own_run_dir

    with own_run_dir(tmp_path):  # the first ended: the same run may start again (resume)
        pass


def test_a_killed_launcher_does_not_keep_its_run_dir(tmp_path: Path) -> None:
    from gmiexp.launch.ownership import own_run_dir

    code = ("import sys, time\nfrom pathlib import Path\nfrom gmiexp.launch.ownership import own_run_dir\n"
            "with own_run_dir(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        from gmiexp.errors import ConfigError

        with pytest.raises(ConfigError, match=f"pid {p.pid} on "), own_run_dir(tmp_path):
            pass
        p.kill()
        p.wait()
        with own_run_dir(tmp_path):  # the kernel dropped the dead holder's lock
            assert json.loads((tmp_path / "launcher.lock").read_text())["pid"] != p.pid
    finally:
        p.kill()
        p.wait()


# ---- 5. a damaged checkpoint ------------------------------------------------------------------------------------
def _damage(path: Path) -> None:
    """Overwrite 2,000 bytes inside the file, keeping its size (a bad disk block, a bad copy)."""
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid:mid + 2000] = bytes((b ^ 0x5A) for b in data[mid:mid + 2000])
    path.write_bytes(bytes(data))


def test_a_damaged_checkpoint_of_unchanged_size_is_passed_over(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 4))
    opt = torch.optim.Adam(model.parameters())
    nn = tmp_path / "nn"
    older = checkpoint.save(nn / "last_Cartpole_ep_1_rew_1.0", model, opt, 1, 100)
    newer = checkpoint.save(nn / "last_Cartpole_ep_2_rew_2.0", model, opt, 2, 200)
    assert checkpoint.verify(newer) is True and checkpoint.checksum_path(newer).exists()
    assert latest_checkpoint(nn) == (newer, 2)
    size = newer.stat().st_size
    _damage(newer)
    assert newer.stat().st_size == size
    assert latest_checkpoint(nn) == (older, 1)
    assert f"passing over checkpoint {newer} (damaged" in capsys.readouterr().err


@pytest.mark.slow
def test_rl_games_checkpoints_carry_checksums_and_a_damaged_one_is_passed_over_on_resume(tmp_path: Path,
                                                                                         no_orphans: None) -> None:
    run = [*FAST, *ONE, "train.save_frequency=1", f"hydra.run.dir={tmp_path}"]
    r = run_cli(*run, "max_iterations=2")
    assert r.returncode == 0, r.stderr[-3000:]
    pths = sorted(tmp_path.rglob("*.pth"))
    assert pths and all(checkpoint.verify(p) is True for p in pths), pths  # rl-games' own saves too
    ep2s = [p for p in pths if "_ep_2_" in p.name]  # the periodic and the last checkpoint of epoch 2
    for ep2 in ep2s:
        _damage(ep2)
    for best in (p for p in pths if "_ep_" not in p.name):
        best.unlink()  # rl-games' best-reward file may be epoch 2 too: leave the periodic ones only
    r = run_cli(*run, "max_iterations=3")
    assert r.returncode == 0, r.stderr[-3000:]
    assert all(f"passing over checkpoint {ep2} (damaged" in r.stderr for ep2 in ep2s)
    resumed = json.loads((tmp_path / "summary.json").read_text())["resumed"]
    assert resumed["epoch"] == 1 and "_ep_1_" in resumed["checkpoint"]


def test_a_failed_resume_says_which_checkpoint_it_loaded(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from gmiexp.app import _explained
    from gmiexp.errors import LaunchError

    plan = SimpleNamespace(resumed={"checkpoint": "/runs/a/nn/last_Ant_ep_7_rew_1.0.pth", "epoch": 7})
    err = _explained(LaunchError("GMI 0 failed (exit code 1, pid 9)\n--- log tail ---"), plan, tmp_path)
    assert str(err).splitlines() == ["GMI 0 failed (exit code 1, pid 9); this attempt resumed from checkpoint "
                                     "/runs/a/nn/last_Ant_ep_7_rew_1.0.pth (epoch 7)", "--- log tail ---"]


# ---- 6. a port that is not a rendezvous store --------------------------------------------------------------------
class SilentServer:
    """Accepts connections on 127.0.0.1 and never says a word (not a rendezvous store)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


def node1(port: int, run_dir: Path, timeout_s: int) -> list[str]:
    return [*FAST, *ONE, "launch.nnodes=2", "launch.node_rank=1", f"launch.rdzv_endpoint=127.0.0.1:{port}",
            f"launch.rdzv_timeout_s={timeout_s}", f"hydra.run.dir={run_dir}"]


def test_node_1_facing_a_silent_port_exits_within_the_rdzv_timeout(tmp_path: Path, no_orphans: None) -> None:
    server = SilentServer()
    try:
        t0 = time.time()
        r = run_cli(*node1(server.port, tmp_path, 5), timeout=120)
        elapsed = time.time() - t0
    finally:
        server.close()
    assert r.returncode == 1, r.stderr[-2000:]
    said = [line for line in r.stderr.splitlines() if line.strip() and "waiting for every node at" not in line]
    assert error_lines(r.stderr) == said  # that line only (besides the launcher saying where it waits)
    (line,) = error_lines(r.stderr)
    assert "within 5s" in line and "does not answer as a rendezvous store" in line
    print(f"silent port: exit 1 after {elapsed:.1f}s (rdzv_timeout_s=5, start-up included)")


def test_sigterm_while_waiting_for_node_0_exits_130(tmp_path: Path, no_orphans: None) -> None:
    server = SilentServer()
    p = popen_cli(*node1(server.port, tmp_path, 120))
    try:
        assert wait_for(lambda: server.conns, 90), "node 1 never connected"
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=30)
    finally:
        server.close()
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err[-2000:]
    assert error_lines(err) == ["gmiexp: error: stopped by signal SIGTERM"]


def test_node_1_with_nothing_on_the_port_says_so_without_cpp_frames(tmp_path: Path, no_orphans: None) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run_cli(*node1(port, tmp_path, 3), timeout=120)
    assert r.returncode == 1, r.stderr[-2000:]
    (line,) = error_lines(r.stderr)
    assert "within 3s" in line and "Connection refused" in line
    # and what tests/launch/test_node_agreement.py's node-1-alone case (slow, the same launch) checked by default:
    # the line names node 0's store, and no C++ frame or c10d source file reaches stderr
    assert "node 1 cannot reach node 0's store" in line
    assert not re.search(r"^frame #\d+|socket\.cpp|TCPStore\.cpp", r.stderr, re.M), r.stderr
