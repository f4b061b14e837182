"""``python -m gmiexp.tools.warp_kernels``: kernels compiled ahead are all a later training process loads."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from gmitest import cli_env, run_cli

pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")

from gmiexp.tools.warp_kernels import main  # noqa: E402


def test_an_unknown_task_exits_2_naming_mjlab_s_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["Mjlab-Cartpole-Balance", "Mjlab-Nope"]) == 2
    err = capsys.readouterr().err
    assert "invalid task: 'Mjlab-Nope'; valid: " in err and "Mjlab-Velocity-Flat-Unitree-Go1" in err
    assert "'Mjlab-Cartpole-Balance'" not in err  # only the bad id is named


@pytest.mark.slow  # compiles Cartpole's kernels from an empty cache (~40 s); `make venv` runs the tool every build
@pytest.mark.timeout(900)
def test_a_two_gmi_run_and_its_resume_compile_nothing_after_the_tool(tmp_path: Path) -> None:
    env = {**cli_env(), "WARP_CACHE_PATH": str(tmp_path / "warp")}
    r = subprocess.run([sys.executable, "-m", "gmiexp.tools.warp_kernels", "Mjlab-Cartpole-Balance"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.fullmatch(r"gmiexp\.tools\.warp_kernels: Mjlab-Cartpole-Balance on cpu: [\d.]+ s \(cache: .*\)\n",
                        r.stdout)
    assert "(compiled)" in r.stderr  # Warp's own report per module: the cache was empty
    common = ("train=rslrl", "task=Mjlab-Cartpole-Balance", "batch.total_envs=4", "gmis_per_gpu=2",
              "launch.progress=false", "launch.heartbeat_timeout_s=300")
    run = run_cli(*common, "max_iterations=1", f"hydra.run.dir={tmp_path / 'run'}", env=env, timeout=400)
    assert run.returncode == 0, run.stderr[-3000:]
    ckpt = tmp_path / "run" / "rsl_rl" / "model_0.pt"
    resumed = run_cli(*common, "max_iterations=2", f"checkpoint={ckpt}", f"hydra.run.dir={tmp_path / 'resumed'}",
                      env=env, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    logs = [p for d in ("run", "resumed") for p in (tmp_path / d / "logs").rglob("*") if p.is_file()]
    said = run.stderr + resumed.stderr + "".join(p.read_text(errors="replace") for p in logs)
    assert "(cached)" in said and "(compiled)" not in said
