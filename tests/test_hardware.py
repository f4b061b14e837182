from __future__ import annotations

import types

import pytest

from gmiexp import hardware
from gmiexp.errors import ConfigError


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
    from gmitest import compose_config

    from gmiexp.planner.build import build_plan, host

    assert [hardware.preset(n).network_gbps for n in ("dgx_a100", "h100x8", "h200x1")] == [200.0, 400.0, 400.0]
    assert hardware.preset("cpu").network_gbps is None  # not known: the cost model assumes one and says so
    assert host(compose_config("hardware=cpu", "hardware.network_gbps=25")).network_gbps == 25.0
    assert host(compose_config("hardware=dgx_a100", "hardware.network_gbps=1600")).network_gbps == 1600.0
    plan, _ = build_plan(compose_config("mode=plan", "hardware=cpu", "task=Cartpole", "hardware.network_gbps=10"),
                         tmp_path)
    assert plan.hardware["network_gbps"] == 10.0  # the Plan carries it to the cost model
    with pytest.raises(ConfigError, match="hardware.network_gbps"):
        build_plan(compose_config("mode=plan", "hardware=cpu", "hardware.network_gbps=0"), tmp_path)
