"""The part of the host a run may use (a packed member's slice): hardware.gpus, .mig_instances, .cpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from gmitest import compose_config, run_here

from gmiexp.errors import ConfigError
from gmiexp.hardware import GPUInfo, Hardware, MigDevice
from gmiexp.planner import build as planner


def test_hardware_gpus_moves_the_gmis_onto_that_gpu(tmp_path: Path) -> None:
    cfg = compose_config("task=Cartpole", "hardware=h100x8", "hardware.mig=false", "backend=mps", "mode=plan",
                         "gmis_per_gpu=2", "hardware.gpus=[3]")
    plan, _ = planner.build_plan(cfg, tmp_path)
    assert [g.device for g in plan.gmis] == [3, 3]
    assert {g.env["CUDA_VISIBLE_DEVICES"] for g in plan.gmis} == {"3"}


def test_hardware_gpus_maps_devices_in_order(tmp_path: Path) -> None:
    cfg = compose_config("task=Cartpole", "hardware=h100x8", "mode=plan", "num_gpus=2", "gmis_per_gpu=1",
                         "hardware.gpus=[5,2]")
    plan, _ = planner.build_plan(cfg, tmp_path)
    assert [g.device for g in plan.gmis] == [5, 2]


@pytest.mark.parametrize(("gpus", "msg"), [("[8]", "invalid hardware.gpus entry: 8; valid: 0, 1, 2"),
                                           ("[1]", None), ("[1,1]", "2 distinct GPU indices")])
def test_hardware_gpus_must_name_gpus_of_the_host(tmp_path: Path, gpus: str, msg: str | None) -> None:
    cfg = compose_config("task=Cartpole", "hardware=h100x8", "mode=plan", "num_gpus=2" if "," in gpus else "num_gpus=1",
                         f"hardware.gpus={gpus}")
    if msg is None:
        planner.build_plan(cfg, tmp_path)
        return
    with pytest.raises(ConfigError, match=msg):
        planner.build_plan(cfg, tmp_path)


def mig_host() -> Hardware:
    migs = [MigDevice(uuid=f"MIG-{k}", gpu_index=0, index=k, profile="3g.40gb", memory_mb=40000) for k in range(2)]
    return Hardware(source="nvml", cpu_count=8, gpus=[GPUInfo(index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-0",
                                                              compute_capability=(9, 0), memory_mb=81559,
                                                              mig_mode=True, mig_devices=migs)])


def test_hardware_mig_instances_leaves_the_run_only_those(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner, "resolve", lambda name: mig_host())
    hw = planner.host(compose_config("hardware.mig_instances=[MIG-1]"))
    assert [d.uuid for d in hw.gpus[0].mig_devices] == ["MIG-1"]
    with pytest.raises(ConfigError, match="invalid hardware.mig_instances entry: 'MIG-7'; valid: MIG-0, MIG-1"):
        planner.host(compose_config("hardware.mig_instances=[MIG-7]"))


# run_here: the real CLI's paths stay launched elsewhere: mode=plan's by
# tests/test_app.py::test_plan_stdout_is_yaml_on_a_fresh_machine, a job's exit 2 by
# tests/test_cli_errors.py::test_cli_value_error_exits_2


def test_hardware_cpus_narrows_the_run_to_those_cores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    core = min(os.sched_getaffinity(0))
    r = run_here(capsys, tmp_path, "mode=plan", "task=Cartpole", "hardware=cpu", "gmis_per_gpu=1",
                 f"hardware.cpus=[{core}]")
    assert r.returncode == 0, r.stderr[-2000:]
    assert yaml.safe_load(r.stdout)["gmis"][0]["torch_threads"] == 1  # its thread budget is that one core
    bad = run_here(capsys, tmp_path, "mode=plan", "task=Cartpole", "hardware=cpu", "hardware.cpus=[4096]")
    assert bad.returncode == 2 and "invalid hardware.cpus: [4096]; valid: a non-empty subset" in bad.stderr


def test_pinned_gmis_of_a_narrowed_run_stay_on_its_cores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    core = max(os.sched_getaffinity(0))
    r = run_here(capsys, tmp_path, "mode=plan", "task=Cartpole", "hardware=cpu", "gmis_per_gpu=2",
                 "backend.pin_cores=true", f"hardware.cpus=[{core}]")
    assert r.returncode == 0, r.stderr[-2000:]
    assert [g["cpus"] for g in yaml.safe_load(r.stdout)["gmis"]] == [[core], [core]]


def test_an_rsl_rl_run_is_not_warned_about_rl_games_minibatch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """train.minibatch_size is rl-games' key: rsl_rl cuts its batch by num_mini_batches (checked by its own rule)."""
    rlgames = ("task=Cartpole", "num_envs=8", "num_gpus=1", "gmis_per_gpu=1", "train.device=cpu")
    with caplog.at_level("WARNING", logger="gmiexp"):
        planner.build_plan(compose_config(*rlgames), tmp_path)
    assert "train.minibatch_size=1024 does not divide" in caplog.text  # 16 x 8 rows: fitted, and said so
    caplog.clear()
    with caplog.at_level("WARNING", logger="gmiexp"):
        planner.build_plan(compose_config(*rlgames, "train=rslrl", "task.vec_env=rslrl_vecenv:make",
                                          "+train.rslrl.num_steps_per_env=16"), tmp_path)
    assert "minibatch_size" not in caplog.text
