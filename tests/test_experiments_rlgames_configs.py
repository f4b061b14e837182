"""experiments/rlgames_configs/table.py: rl-games' shipped configs run through gmiexp, tabled as runs/refused/failed."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "experiments" / "rlgames_configs" / "table.py"
_spec = importlib.util.spec_from_file_location("rlgames_configs_table", TABLE)
table = importlib.util.module_from_spec(_spec)  # the script's pure helpers
_spec.loader.exec_module(table)


def run_table(tmp_path, *overrides, timeout=900):
    out = tmp_path / "table.md"
    r = subprocess.run([sys.executable, str(TABLE), f"output={out}", f"work_dir={tmp_path / 'runs'}", *overrides],
                       cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ})
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    rows = {ln.split("|")[1].strip(" `"): [c.strip() for c in ln.split("|")[2:5]]
            for ln in out.read_text().splitlines() if ln.startswith("| `")}
    return r.stdout, out.read_text(), rows


def test_refused_files_are_tabled_with_every_reason_the_importer_gave(tmp_path):
    stdout, text, rows = run_table(tmp_path, "files=[brax/sac_ant.yaml,ppo_smac.yaml]", "jobs=2", "layouts=[]")
    family, result, reason = rows["brax/sac_ant.yaml"]
    assert (family, result) == ("brax", "refused")
    assert reason.startswith("params.config.env_name='brax': Brax/JAX is not a gmiexp simulator") \
        and "params.algo.name='sac': SAC is not run by gmiexp" in reason and "config.replay_buffer_size" in reason
    assert rows["ppo_smac.yaml"][:2] == ["top level", "refused"] and "SMAC" in rows["ppo_smac.yaml"][2]
    assert "**2 files (a subset: 2 of the 157 shipped files): 0 runs, 2 refused, 0 failed**" in text
    assert stdout.strip().endswith(f"2 files: 0 runs, 2 refused, 0 failed; table in {tmp_path / 'table.md'}")


def test_only_filters_the_shipped_files_and_an_unknown_file_is_named():
    assert table.select([], "dm_control/walker") == ["dm_control/walker_run.yaml", "dm_control/walker_stand.yaml",
                                                     "dm_control/walker_walk.yaml"]
    assert len(table.select([], "")) == 157
    with pytest.raises(SystemExit, match="not shipped under .*: nope.yaml"):
        table.select(["nope.yaml"], "")


def test_the_layout_columns_name_each_result_and_its_reason():
    rows = [{"file": "a.yaml", "result": "runs", "reason": "trained 2 epochs",
             "layouts": {"tdg_ex": {"result": "runs", "reason": "trained 2 epochs"},
                         "decoupled_async": {"result": "refused", "reason": "invalid x"}}},
            {"file": "b/c.yaml", "result": "refused", "reason": "no"}]
    text = table.markdown(rows, ["max_iterations=2"], 157, ["tdg_ex", "decoupled_async"])
    assert "| file | family | result | reason | tdg_ex | decoupled_async |" in text
    assert "| `a.yaml` | top level | runs | trained 2 epochs | runs | refused: invalid x |" in text
    assert "| `b/c.yaml` | b | refused | no | - | - |" in text
    assert "tdg_ex: 1 runs, 0 refused, 0 failed; decoupled_async: 0 runs, 1 refused, 0 failed" in text


def test_a_failure_is_tabled_with_its_last_error_line():
    log = "noise\nTraceback (most recent call last):\n  File x\nTypeError: boom\n"
    assert table.reasons(log) == "TypeError: boom"
    assert table.reasons("gmiexp: error: invalid task.env_id: 'X'; valid: A\n") == "invalid task.env_id: 'X'; valid: A"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_one_file_runs_and_one_is_refused(tmp_path):
    _, text, rows = run_table(tmp_path, "files=[mujoco/hopper_envpool.yaml,mujoco/sac_ant_envpool.yaml]",
                              'overrides=["max_iterations=2","num_envs=8","gmis_per_gpu=1",'
                              '"train.horizon_length=16","launch.progress=false","logger=none"]')
    assert rows["mujoco/hopper_envpool.yaml"] == ["mujoco", "runs", "trained 2 epochs"]
    assert "| trained 2 epochs | runs | runs |" in text  # tdg_ex and decoupled_async too
    assert rows["mujoco/sac_ant_envpool.yaml"][1] == "refused"
    assert rows["mujoco/sac_ant_envpool.yaml"][2].startswith("params.algo.name='sac': SAC is not run by gmiexp")
    assert "1 runs, 1 refused, 0 failed" in text


def test_notes_before_the_error_are_not_reasons():
    log = ("gmiexp: imported x.yaml with notes:\n  params.config.device='cuda': gmiexp places ...\n"
           "gmiexp: error: invalid train.file=x.yaml: gmiexp cannot honour 1 key(s) ...:\n"
           "  params.algo.name='sac': SAC is not run by gmiexp\n")
    assert table.reasons(log) == "params.algo.name='sac': SAC is not run by gmiexp"
    assert table.reasons("gmiexp: imported x with notes:\n  params.a=1: n\ngmiexp: error: task.continuous=False "
                         "does not match task 'Pong-v5'\n") == "task.continuous=False does not match task 'Pong-v5'"
