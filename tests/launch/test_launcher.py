"""The launcher end to end: user roles across GMIs, failures, hangs, Ctrl-C, no orphans."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import psutil
import pytest
from gmitest import FAST, StopClock, popen_cli, run_cli

from gmiexp.status import read_history, read_status


def test_user_role_allreduce_send_recv_across_3_gmis(tmp_path: Path, no_orphans: None) -> None:
    r = run_cli("role=user_roles:CheckRole", "num_gpus=3", "gmis_per_gpu=1", *FAST,
                f"hydra.run.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    n = 3
    for me in range(n):
        out = json.loads((tmp_path / f"role_{me}.json").read_text())
        assert out["sum"] == [float(sum(range(1, n + 1)))] * 5
        assert out["mean"] == [sum(range(n)) / n] * 6
        prev = (me - 1) % n
        assert out["from_prev"] == [10.0 * prev + k for k in range(4)]
    assert (tmp_path / "summary.json").exists() and (tmp_path / "plan.yaml").exists()


def _wait_for(pred, timeout: float) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.2)
    return False


def _wait_stage(run_dir: Path, gmi: int, stage: str, timeout: float = 90) -> dict:
    ok = _wait_for(lambda: (read_status(run_dir, gmi) or {}).get("stage") == stage, timeout)
    assert ok, f"GMI {gmi} never reached stage {stage!r}: {read_status(run_dir, gmi)}"
    return read_status(run_dir, gmi) or {}


def _assert_all_gone(proc: psutil.Process | None, pids: list[int]) -> None:
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid


def test_killing_one_gmi_stops_all_within_10s(tmp_path: Path, no_orphans: None) -> None:
    p = popen_cli("role=user_roles:SleepRole", "num_gpus=1", "gmis_per_gpu=3", *FAST,
                  f"hydra.run.dir={tmp_path}")
    try:
        sts = [_wait_stage(tmp_path, g, "sleeping") for g in range(3)]
        pids = [int(s["pid"]) for s in sts]
        clock = StopClock(pids).start()
        psutil.Process(pids[1]).kill()
        _out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode not in (0, None)
    assert clock.elapsed() < 10, f"the GMIs took {clock.elapsed():.1f}s to stop"
    assert "GMI 1 failed" in err
    assert "every GMI was stopped" in err
    _assert_all_gone(None, pids)
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "failed"


def test_bad_input_only_a_gmi_sees_exits_2_naming_it_and_stops_every_gmi(tmp_path: Path, no_orphans: None) -> None:
    """A ConfigError raised in a GMI (a module or key it imports) is the run's exit 2, its reason the one line."""
    p = popen_cli("role=user_roles:RefuseRole", "num_gpus=1", "gmis_per_gpu=2", *FAST, f"hydra.run.dir={tmp_path}")
    try:
        pids = [int(_wait_stage(tmp_path, 0, "sleeping")["pid"])]
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 2, err[-3000:]
    said = [ln for ln in err.splitlines() if ln.startswith("gmiexp: error: ")]
    assert said == ["gmiexp: error: invalid task.env_config key: 'nosuch'; the environment config has no 'nosuch' "
                    "(GMI 1 refused it at start and exited 2; every GMI was stopped)"], err[-3000:]
    assert "Traceback" not in err
    _assert_all_gone(None, pids)
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["status"] == "failed" and s["error"].startswith("invalid task.env_config key: 'nosuch'")


def test_hung_gmi_is_detected_and_everything_stops(tmp_path: Path, no_orphans: None) -> None:
    t0 = time.time()
    # 3 s was shorter than a GMI's start on a loaded 2-core host (both still 'starting': the longest silent named)
    r = run_cli("role=user_roles:HangRole", "num_gpus=1", "gmis_per_gpu=2", *FAST,
                "launch.heartbeat_timeout_s=12", f"hydra.run.dir={tmp_path}", timeout=120)
    assert r.returncode == 1, r.stderr[-2000:]
    assert "GMI 1 hung: no heartbeat" in r.stderr
    assert time.time() - t0 < 90


def test_ctrl_c_stops_cleanly(tmp_path: Path, no_orphans: None) -> None:
    p = popen_cli("role=user_roles:SleepRole", "num_gpus=2", "gmis_per_gpu=1", *FAST,
                  f"hydra.run.dir={tmp_path}")
    try:
        pids = [int(_wait_stage(tmp_path, g, "sleeping")["pid"]) for g in range(2)]
        clock = StopClock(pids).start()
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err[-2000:]
    assert "every GMI was stopped" in err
    assert clock.elapsed() < 10, f"the GMIs took {clock.elapsed():.1f}s to stop"
    _assert_all_gone(None, pids)


def test_inprocess_single_gmi(tmp_path: Path) -> None:
    from gmitest import compose_config

    from gmiexp.app import run

    cfg = compose_config(*FAST, "num_gpus=1", "gmis_per_gpu=1", "launch.inprocess=true", "max_iterations=2")
    assert run(cfg, tmp_path) == 0
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["status"] == "ok" and s["metrics"]["perf/env_steps_per_s"] > 0


def test_inprocess_a_gmis_refusal_is_bad_input_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gmitest import compose_config

    from gmiexp.app import run

    cfg = compose_config(*FAST, "role=user_roles:RefuseRole", "gmis_per_gpu=1", "launch.inprocess=true")
    assert run(cfg, tmp_path) == 2
    assert "gmiexp: error: invalid task.env_config key: 'nosuch'; the environment config has no 'nosuch' (GMI 0 " \
           "refused it at start, in the launcher's process)" in capsys.readouterr().err
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "failed"


@pytest.mark.parametrize("gmis", [2])
def test_inprocess_refuses_multi_gmi_plans(gmis: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gmitest import compose_config

    from gmiexp.app import run

    cfg = compose_config(*FAST, f"gmis_per_gpu={gmis}", "launch.inprocess=true")
    assert run(cfg, tmp_path) == 2
    assert "launch.inprocess" in capsys.readouterr().err


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_a_reused_run_dir_starts_a_fresh_history(tmp_path: Path) -> None:
    """A second run in the same hydra.run.dir must not append to (and so corrupt) the first run's epochs."""
    for _ in range(2):  # training again from scratch (launch.resume=auto refuses a finished run: test_requeue)
        r = run_cli("max_iterations=3", *FAST, "launch.resume=never", f"hydra.run.dir={tmp_path}")
        assert r.returncode == 0, r.stderr[-3000:]
        rows = read_history(tmp_path, 0)
        assert [row["iteration"] for row in rows] == [1, 2, 3]
