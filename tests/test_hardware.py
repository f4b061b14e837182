from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml
from gmitest import cli_env, compose_config

from fakes import nvml as fake_nvml
from gmiexp import hardware
from gmiexp.errors import ConfigError
from gmiexp.planner.build import build_plan, host


def test_presets() -> None:
    dgx = hardware.preset("dgx_a100")
    assert len(dgx.gpus) == 8 and dgx.gpus[0].name == "NVIDIA A100-SXM4-40GB"
    assert dgx.gpus[0].compute_capability == (8, 0) and dgx.gpus[0].memory_mb == 40960
    assert len(hardware.preset("h100x8").gpus) == 8
    h200 = hardware.preset("h200x1")
    assert len(h200.gpus) == 1 and h200.gpus[0].cc == 9.0
    assert not hardware.preset("cpu").has_gpu


def test_presets_are_stock_machines_with_mig_off() -> None:
    """DGX A100/H100/H200 ship with MIG disabled; hardware.mig=true (hardware.with_mig) turns it on."""
    for name in ("dgx_a100", "h100x8", "h200x1"):
        assert {g.mig_mode for g in hardware.preset(name).gpus} == {False}, name
        assert {g.mig_mode for g in hardware.with_mig(hardware.preset(name), True).gpus} == {True}


def test_unknown_preset_lists_valid() -> None:
    with pytest.raises(ConfigError, match="invalid hardware: 'tpu'; valid: auto, cpu, dgx_a100, h100x8, h200x1"):
        hardware.resolve("tpu")


def test_cpu_fallback_when_nvml_cannot_init() -> None:
    class NVMLError(Exception):
        pass

    def fail() -> None:
        raise NVMLError("NVML Shared Library Not Found")

    fake = types.SimpleNamespace(nvmlInit=fail, NVMLError=NVMLError)
    hw = hardware.discover(fake)  # type: ignore[arg-type]
    assert not hw.has_gpu and hw.source == "cpu" and "Not Found" in hw.note
    assert hw.cpu_count >= 1


def test_this_machine_discovers_cleanly() -> None:
    hw = hardware.discover()
    assert hw.cpu_count >= 1
    assert hw.describe()


def test_network_bandwidth_of_presets_and_hosts(tmp_path) -> None:
    assert [hardware.preset(n).network_gbps for n in ("dgx_a100", "h100x8", "h200x1")] == [200.0, 400.0, 400.0]
    assert hardware.preset("cpu").network_gbps is None  # not known: the cost model assumes one and says so
    assert host(compose_config("hardware=cpu", "hardware.network_gbps=25")).network_gbps == 25.0
    assert host(compose_config("hardware=dgx_a100", "hardware.network_gbps=1600")).network_gbps == 1600.0
    plan, _ = build_plan(compose_config("mode=plan", "hardware=cpu", "task=Cartpole", "hardware.network_gbps=10"),
                         tmp_path)
    assert plan.hardware["network_gbps"] == 10.0  # the Plan carries it to the cost model
    with pytest.raises(ConfigError, match="hardware.network_gbps"):
        build_plan(compose_config("mode=plan", "hardware=cpu", "hardware.network_gbps=0"), tmp_path)


def _h100s(n: int, **kw) -> hardware.Hardware:
    return hardware.discover(fake_nvml.make([fake_nvml.h100_80gb(i) for i in range(n)]), **kw)


@pytest.mark.parametrize(("value", "indices", "note"), [
    ("2,3", [2, 3], "CUDA_VISIBLE_DEVICES=2,3: 2 of the host's 8 GPUs"),
    ("3,1", [3, 1], ""),  # CUDA's order is the variable's
    ("GPU-b3c9e7d1-0f2a-4c6b-8e5d-6a7b8c900005", [5], ""),
    ("1,9,2", [1], "'9' names no GPU here; CUDA ignores it and what follows"),
    ("0,0", [0], ""),
])
def test_an_inherited_cuda_visible_devices_leaves_the_run_only_its_gpus(value: str, indices: list[int],
                                                                        note: str) -> None:
    """A Slurm allocation without device cgroups (or a user's choice): NVML still lists all 8 GPUs; before, a run
    placed its GMIs on GPUs 0.. whatever the variable said."""
    hw = _h100s(8, cuda_visible_devices=value)
    assert [g.index for g in hw.gpus] == indices and hw.source == "nvml"
    assert note in hw.note


@pytest.mark.parametrize("value", ["", "-1", "GPU-nosuch"])
def test_a_cuda_visible_devices_that_leaves_no_gpu_is_a_cpu_host(value: str) -> None:
    hw = _h100s(2, cuda_visible_devices=value)
    assert not hw.has_gpu and hw.source == "cpu" and "CUDA_VISIBLE_DEVICES" in hw.note


def test_a_mig_entry_keeps_its_gpu_with_the_listed_instances_only() -> None:
    migs = fake_nvml.a100_migs(n=3, gpu=1)
    host = fake_nvml.make([fake_nvml.a100_40gb(0), fake_nvml.a100_40gb(1, mig=1, migs=migs)])
    hw = hardware.discover(host, cuda_visible_devices=f"{migs[2].uuid},{migs[0].uuid}")
    assert [g.index for g in hw.gpus] == [1]
    assert [d.uuid for d in hw.gpus[0].mig_devices] == [migs[2].uuid, migs[0].uuid]


def test_a_fake_host_ignores_this_process_s_variable(monkeypatch) -> None:
    """A stand-in NVML is another host: the variable of the process that reads it is not about its GPUs."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert [g.index for g in _h100s(4).gpus] == [0, 1, 2, 3]


def test_a_run_on_the_gpus_it_was_given_places_its_gmis_there_by_uuid(tmp_path) -> None:
    """num_gpus=2 under CUDA_VISIBLE_DEVICES=5,6: GMIs on GPUs 5 and 6, each named by UUID (an index would be read
    in CUDA's device order, not NVML's)."""
    hw = _h100s(8, cuda_visible_devices="5,6")
    plan, _ = build_plan(compose_config("task=Cartpole", "num_gpus=2", "gmis_per_gpu=2", "backend=direct"),
                         tmp_path, hardware=hw)  # mps names GPUs by UUID already (tests/backends/test_mps.py)
    assert [g.device for g in plan.gmis] == [5, 5, 6, 6]
    uuids = {g.index: g.uuid for g in hw.gpus}
    assert [g.env["CUDA_VISIBLE_DEVICES"] for g in plan.gmis] == [uuids[5], uuids[5], uuids[6], uuids[6]]


def test_the_command_line_honours_the_variable_it_inherits(tmp_path) -> None:
    """``CUDA_VISIBLE_DEVICES=2,3 python -m gmiexp mode=plan num_gpus=2`` on a (fake) 8-GPU host: GPUs 2 and 3."""
    env = {**cli_env(), "FAKE_NVML_GPUS": "8", "CUDA_VISIBLE_DEVICES": "2,3"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent / "fakes" / "gpu_host"), env["PYTHONPATH"]])
    r = subprocess.run([sys.executable, "-m", "gmiexp", "mode=plan", "task=Cartpole", "num_gpus=2", "gmis_per_gpu=2",
                        f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    plan = yaml.safe_load(r.stdout)
    assert [g["device"] for g in plan["gmis"]] == [2, 2, 3, 3]
    assert plan["hardware"]["note"] == "CUDA_VISIBLE_DEVICES=2,3: 2 of the host's 8 GPUs"


def test_compute_modes_are_read_from_nvml() -> None:
    gpus = [fake_nvml.h100_80gb(i) for i in range(4)]
    for g, mode in zip(gpus, (0, 1, 2, 3), strict=True):
        g.compute_mode = mode
    hw = hardware.discover(fake_nvml.make(gpus))
    assert [g.compute_mode for g in hw.gpus] == ["default", "exclusive_thread", "prohibited", "exclusive_process"]


def test_a_gpu_nvml_cannot_open_is_left_out_not_fatal() -> None:
    """A job's device cgroup can refuse a handle (NO_PERMISSION): before, discover raised and every run, plan and
    doctor on that host stopped with NVML's traceback."""
    gpus = [fake_nvml.h100_80gb(i) for i in range(4)]
    gpus[1].readable = False
    hw = hardware.discover(fake_nvml.make(gpus))
    assert [g.index for g in hw.gpus] == [0, 2, 3] and hw.source == "nvml"
    assert "GPU 1 left out: NVML cannot read it (Insufficient Permissions)" in hw.note
    for g in gpus:
        g.readable = False
    hw = hardware.discover(fake_nvml.make(gpus))
    assert not hw.has_gpu and hw.note.startswith("GPU 0 left out: NVML cannot read it")
