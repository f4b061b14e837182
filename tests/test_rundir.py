"""The shared run helper: the result is summary.json (never the printed line); failures raise with the log tail."""

import csv
import os
import sys
import textwrap

import pytest
from gmitest import fake_python

from gmiexp.rundir import (
    RunFailed,
    eval_std,
    evaluated,
    final_checkpoint,
    gmiexp_command,
    refusal,
    run_gmiexp,
    run_summary,
    write_csv,
)

FAKE_GMIEXP = textwrap.dedent("""
    import json, sys
    args = dict(a.split("=", 1) for a in sys.argv[3:])
    run_dir = args["hydra.run.dir"]
    print("gmiexp ok: a human line that names another directory | /nowhere")
    if args.get("fail"):
        print("Traceback: the reason it failed", file=sys.stderr)
        sys.exit(3)
    if not args.get("silent"):
        json.dump({"status": "ok", "metrics": {"perf/env_steps_per_s": float(args["num_envs"])}},
                  open(run_dir + "/summary.json", "w"))
""")


@pytest.fixture
def python(tmp_path):
    return fake_python(tmp_path, FAKE_GMIEXP)


def test_command_is_python_m_gmiexp_with_the_run_dir_last(tmp_path):
    cmd = gmiexp_command(["task=Ant"], tmp_path, "py")
    assert cmd == ["py", "-m", "gmiexp", "task=Ant", f"hydra.run.dir={tmp_path}"]


def test_reads_summary_json_not_the_printed_line(python, tmp_path):
    s = run_gmiexp(["num_envs=64"], tmp_path / "run", python=python)
    assert s["metrics"]["perf/env_steps_per_s"] == 64.0
    assert "human line" in (tmp_path / "run" / "console.log").read_text()  # printed output goes to the log


def test_failed_run_raises_with_the_log_tail(python, tmp_path):
    with pytest.raises(RunFailed, match="exit code 3") as e:
        run_gmiexp(["num_envs=64", "fail=1"], tmp_path / "run", python=python)
    assert e.value.returncode == 3 and "Traceback: the reason it failed" in str(e.value)


def test_run_without_summary_raises(python, tmp_path):
    with pytest.raises(RunFailed, match="no summary.json"):
        run_gmiexp(["num_envs=64", "silent=1"], tmp_path / "run", python=python)


def test_timeout_kills_the_run_and_raises(tmp_path):
    with pytest.raises(RunFailed, match="timeout") as e:
        run_summary([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(30)"],
                    tmp_path / "run", timeout_s=1.0)
    assert e.value.returncode is None and "started" in str(e.value)


def test_write_csv_round_trips_rows(tmp_path):
    rows = [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    path = write_csv(rows, tmp_path / "t.csv")
    assert list(csv.DictReader(path.open())) == [{"a": "1", "b": "x"}, {"a": "2", "b": "y"}]
    assert write_csv([], tmp_path / "empty.csv", ["system"]).read_text().strip() == "system"


def test_final_checkpoint_is_the_newest_rl_games_or_rsl_rl_one(tmp_path):
    assert final_checkpoint(tmp_path) is None
    old, new = tmp_path / "rsl_rl" / "model_0.pt", tmp_path / "rsl_rl" / "model_9.pt"
    old.parent.mkdir()
    for i, p in enumerate((old, new, tmp_path / "other.pt")):
        p.write_bytes(b"")
        os.utime(p, (1000 + i, 1000 + i))
    assert final_checkpoint(tmp_path) == new  # other.pt is neither rl-games' nor rsl_rl's
    pth = tmp_path / "rl_games" / "run" / "nn" / "Ant.pth"
    pth.parent.mkdir(parents=True)
    pth.write_bytes(b"")
    assert final_checkpoint(tmp_path) == pth


def test_a_refused_evaluation_is_named_by_its_error_clause_without_the_checkpoint_path(tmp_path):
    log = tmp_path / "console.log"
    log.write_text("loading\ngmiexp: error: invalid checkpoint=/tmp/x/model_3.pt: an rsl_rl policy; valid: rl-games\n")
    assert refusal(RunFailed("exit code 2", tmp_path, log, 2)) == "invalid checkpoint=<the run's>: an rsl_rl policy"
    assert refusal(RunFailed("exit code 2", tmp_path, tmp_path / "none.log", 2)) == "exit code 2"
    assert evaluated(tmp_path, 0, 1) == (None, "skipped (eval_episodes=0)")


def test_the_evaluations_spread_is_read_from_its_summary_and_none_without_one(tmp_path):
    assert eval_std(tmp_path) is None  # never evaluated
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "summary.json").write_text('{"metrics": {"eval/return_mean": 5.0}}')
    assert eval_std(tmp_path) is None  # an evaluation that recorded no spread
    (tmp_path / "eval" / "summary.json").write_text('{"metrics": {"eval/return_mean": 5.0, "eval/return_std": 2.5}}')
    assert eval_std(tmp_path) == 2.5
