"""mode=plan sizes mjlab tasks from gmiexp's own table: policy parameters and Table 3's terms, hand-worked."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from gmitest import compose_config

from gmiexp.app import run

pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")


def mlp(sizes: list[int]) -> int:
    return sum(a * b + b for a, b in zip(sizes, sizes[1:], strict=False))


@pytest.mark.parametrize(("task", "obs", "act", "critic"), [("Go1", 48, 12, 72), ("G1", 99, 29, 111),
                                                      ("MjlabCartpole", 5, 1, 5)])
def test_plan_knows_mjlab_sizes(task: str, obs: int, act: int, critic: int, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """mode=plan in this process (a launch costs 3-4 s of CPU; the CLI's plan path is tests/test_app.py's)."""
    capsys.readouterr()
    code = run(compose_config("mode=plan", f"task={task}", "hardware=h100x8", "hardware.mig=false", "num_gpus=1",
                              "gmis_per_gpu=2", "backend=mps", "num_envs=4096"), tmp_path)
    r = capsys.readouterr()
    assert code == 0, r.err[-2000:]
    plan = yaml.safe_load(r.out)
    units = [512, 256, 128] if task != "MjlabCartpole" else [64, 64]
    # rl-games' continuous actor-critic: shared MLP, mu (act), value (1) and a fixed sigma (act); plus the central
    # value net on the critic group (MLP and one value): every gradient the reduction moves
    policy = mlp([obs, *units]) + (units[-1] + 1) * (act + 1) + act
    assert plan["notes"]["policy_params"] == policy + mlp([critic, *units]) + units[-1] + 1
    terms = plan["notes"]["cost_model"]["terms"]
    assert terms["S"] == 4.0 * obs * 4096 and terms["A"] == 4.0 * act * 4096
    assert plan["task"]["simulator"] == "mjlab" and plan["task"]["central_value"] is True


def test_unknown_mjlab_task_exits_2_naming_the_valid_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In this process (the CLI's exit 2 on a refused task: tests/config/test_mjlab_tasks.py's unknown-task test)."""
    capsys.readouterr()
    code = run(compose_config("mode=plan", "task=Go1", "task.env_id=Mjlab-Velocity-Flat-Unitree-Go2"), tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert "Mjlab-Velocity-Flat-Unitree-Go2" in err and "Mjlab-Velocity-Flat-Unitree-G1" in err
