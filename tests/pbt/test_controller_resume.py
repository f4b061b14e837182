"""The population is one job: Ctrl-C a running 4-member torch cart-pole population after its first interval, then
the same command in the same run dir goes on with it to the end, each member from its own last checkpoint; and the
run dirs a population cannot go on in exit 2 before anything starts."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from gmitest import FAST, compose_config, popen_cli, processes_naming, run_cli
from pbt_checks import events

from gmiexp.app import run
from gmiexp.pbt import state, views
from gmiexp.pbt.state import STATE_FILE
from gmiexp.pbt.trainers import checkpoint_at, last_checkpoint
from gmiexp.rl.rlgames.checkpoint import CHECKSUM_SUFFIX
from gmiexp.status import read_history

EPOCH_FRAMES = 32 * 16  # FAST: 32 environments x horizon 16, one GMI
BASE = [*FAST, "num_gpus=1", "gmis_per_gpu=1", "max_iterations=3", "pbt=default", f"pbt.interval_steps={EPOCH_FRAMES}",
        "pbt.threshold_std=0", "pbt.threshold_abs=0", "+pbt.init={train.learning_rate:[1e-5,1e-2]}",
        "launch.inprocess=true"]
POPULATION = [*BASE, "pbt.population=4"]


def wait_for(what, timeout: float, proc) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def whole(life: Path, epoch: int) -> bool:
    """The life's checkpoint of ``epoch`` is written whole: its checksum, written after it, is there."""
    ckpt = checkpoint_at(life, epoch)
    return ckpt is not None and ckpt.with_name(ckpt.name + CHECKSUM_SUFFIX).is_file()


@pytest.fixture(scope="module")
def resumed(tmp_path_factory) -> tuple[Path, object, object]:
    """The population stopped by SIGINT once every member wrote its first interval's checkpoint, then run again."""
    run_dir = tmp_path_factory.mktemp("pbt_resume")
    args = [*POPULATION, f"hydra.run.dir={run_dir}"]
    proc = popen_cli(*args)
    try:
        wait_for(lambda: all(whole(run_dir / "members" / str(m) / "life0", 1) for m in range(4)), 700, proc)
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # the launcher's process group, as a terminal's Ctrl-C
        _, err = proc.communicate(timeout=120)
    stopped = (proc.returncode, err)
    return run_dir, stopped, run_cli(*args, timeout=700)


# slow, though the done-means: two starts of 4 members (the stop, then the resume to the end): 938 s on the
# 2-core host under a load average of 13-18 (nice 19), 135 CPU-seconds in all, so over a minute on a quiet host
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_ctrl_c_then_the_same_command_goes_on_with_the_population_from_each_member_s_checkpoint(resumed) -> None:
    run_dir, (code, err), r = resumed
    assert code == 130, err[-3000:]
    assert r.returncode == 0, r.stderr[-3000:]
    assert "gmiexp pbt ok: 4 members" in r.stdout
    ev = events(run_dir)
    kinds = [e["event"] for e in ev]
    assert kinds.count("population") == 1 and kinds.index("stopped") < kinds.index("resumed") < kinds.index(
        "finished")
    cut = kinds.index("resumed")
    first = [e for e in ev[:cut] if e["event"] == "start"]
    again = [e for e in ev[cut:] if e["event"] == "start" and e["cause"] == "resume"]
    assert sorted(e["member"] for e in first) == sorted(e["member"] for e in again) == [0, 1, 2, 3]
    for e in again:  # no member starts from scratch: each from its own last checkpoint, with its values then
        m = e["member"]
        before = next(s for s in reversed(first) if s["member"] == m)
        found = last_checkpoint(Path(before["run_dir"]))
        assert found is not None and e["checkpoint"] == str(found[0]) and not e["copy"]
        assert e["frames"] == found[1] * EPOCH_FRAMES >= EPOCH_FRAMES
        replayed_values = state.replay(ev[:cut]).members[m].values  # type: ignore[union-attr]
        assert e["values"] == replayed_values
        life = Path(e["run_dir"])
        frames = [h["frames"] for h in read_history(life)]
        assert frames[0] == e["frames"] + EPOCH_FRAMES and frames[-1] == 3 * EPOCH_FRAMES  # goes on to the end
        resumed_from = json.loads((life / "summary.json").read_text())["gmis"]["0"]["resume"]
        assert resumed_from["restored"] is True, resumed_from  # its own run: generators, simulator, episodes
    records = {(e["member"], e["interval"]) for e in ev if e["event"] == "record"}
    assert records == {(m, k) for m in range(4) for k in (1, 2, 3)}
    resumed_event = ev[cut]
    assert resumed_event["segment"] == 2 and {int(k) for k in resumed_event["frames"]} == {0, 1, 2, 3}
    # the lineage reads across both starts: every exploit taken before the stop is still a row, and each member's
    # curve covers every interval once (what a resumed life trained again replaces nothing it kept)
    evs = views.events(run_dir)
    before = views.lineage(evs[:cut])
    assert views.lineage(evs)[:len(before)] == before
    for m, points in views.curves(evs).items():
        own = [p["frames"] for p in points if p["copied"] is None]
        assert own == sorted(own) and set(own) == {EPOCH_FRAMES * k for k in (1, 2, 3)}, (m, points)
    assert "resumed (segment 2)" in views.markdown(run_dir, run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert all(x["lives"] >= 2 for x in summary["members"])


# slow, as its Ctrl-C twin above: two starts of 4 members
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_kill_9_of_the_controller_stops_every_member_and_the_same_command_goes_on(tmp_path: Path) -> None:
    """The controller killed outright (the OOM killer, ``kill -9``) logs no stop and stops no member: each member,
    in a session of its own, stops as on Ctrl-C once the controller is gone (before: they trained on alone to the
    end as orphans), and the same command goes on with the population from each member's own checkpoint."""
    run_dir, epochs, interval = tmp_path / "pop", 60, 10
    args = [*BASE, "pbt.population=4", f"max_iterations={epochs}", f"pbt.interval_steps={interval * EPOCH_FRAMES}",
            f"hydra.run.dir={run_dir}"]
    proc = popen_cli(*args)
    try:
        wait_for(lambda: all(whole(run_dir / "members" / str(m) / "life0", interval) for m in range(4)), 700, proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the controller only: its members run in sessions of their own
        proc.communicate(timeout=60)
    deadline = time.monotonic() + 120
    while processes_naming(run_dir) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not processes_naming(run_dir), [p.info["cmdline"] for p in processes_naming(run_dir)]
    for m in range(4):
        summary = json.loads((run_dir / "members" / str(m) / "life0" / "summary.json").read_text())
        assert summary["status"] == "interrupted", (m, summary["status"])
        assert summary["history"][-1]["iteration"] < epochs
    assert "stopped" not in [e["event"] for e in events(run_dir)]  # killed: it logged nothing more

    r = run_cli(*args, timeout=700)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "gmiexp pbt ok: 4 members" in r.stdout
    ev = events(run_dir)
    kinds = [e["event"] for e in ev]
    cut = kinds.index("resumed")
    again = [e for e in ev[cut:] if e["event"] == "start" and e["cause"] == "resume"]
    assert sorted(e["member"] for e in again) == [0, 1, 2, 3]
    assert all(e["checkpoint"] and e["frames"] >= interval * EPOCH_FRAMES for e in again)
    records = {(e["member"], e["interval"]) for e in ev if e["event"] == "record"}
    assert records == {(m, k) for m in range(4) for k in range(1, epochs // interval + 1)}


def write_population(run_dir: Path, **head) -> None:
    (run_dir / "pbt").mkdir(parents=True)
    (run_dir / STATE_FILE).write_text(json.dumps({"event": "population", **head}) + "\n")


@pytest.mark.parametrize(("given", "head", "finished", "named"), [
    (["launch.resume=never"], {"population": 2}, False,
     "invalid launch.resume=never for run dir {d}: it holds a population"),
    ([], {"population": 3}, False, "population 3 there, 2 here"),
    ([], {"population": 2, "max_iterations": 3}, True, "invalid max_iterations=3 in run dir {d}: the population "
                                                         "there finished (3 epochs); valid: max_iterations > 3"),
])
def test_a_run_dir_the_population_cannot_go_on_in_exits_2_before_any_member_starts(
        given: list[str], head: dict, finished: bool, named: str, tmp_path: Path, capsys) -> None:
    write_population(tmp_path, **head)
    if finished:
        with (tmp_path / STATE_FILE).open("a") as f:
            f.write(json.dumps({"event": "finished", "status": "ok"}) + "\n")
    assert run(compose_config(*BASE, "pbt.population=2", *given), tmp_path) == 2
    err = capsys.readouterr().err
    assert named.format(d=tmp_path) in err
    if given:
        assert "valid: launch.resume=auto" in err
    assert not (tmp_path / "members").exists()


def test_members_without_a_population_log_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "members" / "0").mkdir(parents=True)
    assert run(compose_config(*BASE, "pbt.population=2"), tmp_path) == 2
    assert "no population log" in capsys.readouterr().err
