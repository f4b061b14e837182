from __future__ import annotations

import re
from pathlib import Path

import pytest
from backend_helpers import nvml_host, realise

from fakes import nvml as fake_nvml
from gmiexp.backends.common import split_cores, thread_budget
from gmiexp.backends.direct import DirectBackend
from gmiexp.config import LayoutConfig
from gmiexp.config.schema import DirectBackendConfig
from gmiexp.errors import ConfigError
from gmiexp.hardware import Hardware, preset
from gmiexp.layouts import get
from gmiexp.layouts.layout import LayoutRequest

TCG_EX = get("tcg_ex")


def plan_for(hw: Hardware, gpus: int, per: int, pin: bool = False):
    plan = TCG_EX.build(LayoutRequest(layout=LayoutConfig(), hardware=hw, num_gpus=gpus, gmis_per_gpu=per, num_envs=8))
    return DirectBackend(DirectBackendConfig(pin_cores=pin), hw).realise(plan, Path("/tmp/run"))


def test_cpu_thread_budget_and_pinning() -> None:
    hw = Hardware(source="cpu", cpu_count=4)
    plan = plan_for(hw, 1, 2, pin=True)
    assert [g.torch_threads for g in plan.gmis] == [2, 2]
    assert [g.cpus for g in plan.gmis] == [[0, 1], [2, 3]]
    assert all(g.env["CUDA_VISIBLE_DEVICES"] == "" and g.env["OMP_NUM_THREADS"] == "2" for g in plan.gmis)
    assert plan.backend == "direct"


def test_gpu_visible_devices_per_gmi() -> None:
    plan = plan_for(preset("dgx_a100"), 2, 2)
    assert [g.env["CUDA_VISIBLE_DEVICES"] for g in plan.gmis] == ["0", "0", "1", "1"]
    assert all(g.cpus is None for g in plan.gmis)


def test_split_cores_and_budget() -> None:
    assert split_cores(2, 3) == [[0], [1], [0]]
    assert split_cores(8, 3) == [[0, 1], [2, 3], [4, 5]]
    assert thread_budget(2, 4) == 1 and thread_budget(16, 4) == 4


def test_pin_devices_gives_each_logical_gpu_its_own_cores() -> None:
    """GMIs on different devices never share a core; GMIs of one device share (or split) its cores."""
    hw = Hardware(source="cpu", cpu_count=8)
    plan = TCG_EX.build(LayoutRequest(layout=LayoutConfig(), hardware=hw, num_gpus=2, gmis_per_gpu=2, num_envs=8))
    shared = DirectBackend(DirectBackendConfig(pin_devices=True), hw).realise(plan, Path("/tmp/run"))
    assert [g.cpus for g in shared.gmis] == [[0, 1, 2, 3]] * 2 + [[4, 5, 6, 7]] * 2
    assert [g.torch_threads for g in shared.gmis] == [2, 2, 2, 2]
    plan = TCG_EX.build(LayoutRequest(layout=LayoutConfig(), hardware=hw, num_gpus=2, gmis_per_gpu=2, num_envs=8))
    split = DirectBackend(DirectBackendConfig(pin_devices=True, pin_cores=True), hw).realise(plan, Path("/tmp/run"))
    assert [g.cpus for g in split.gmis] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    two = Hardware(source="cpu", cpu_count=2)
    plan = TCG_EX.build(LayoutRequest(layout=LayoutConfig(), hardware=two, num_gpus=2, gmis_per_gpu=3, num_envs=8))
    small = DirectBackend(DirectBackendConfig(pin_devices=True), two).realise(plan, Path("/tmp/run"))
    assert [g.cpus for g in small.gmis] == [[0]] * 3 + [[1]] * 3
    assert all(g.torch_threads == 1 for g in small.gmis)


def _exclusive_h100s(mode: int, n: int = 2) -> Hardware:
    gpus = [fake_nvml.h100_80gb(i) for i in range(n)]
    gpus[0].compute_mode = mode  # NVML's value: 3 EXCLUSIVE_PROCESS, 2 PROHIBITED
    return nvml_host(*gpus)


def test_several_gmis_on_a_gpu_that_admits_one_process_exit_2_naming_it_and_mps(tmp_path: Path) -> None:
    """A cluster's EXCLUSIVE_PROCESS GPU: before, the plan passed and the second GMI failed at its first CUDA call."""
    hw = _exclusive_h100s(3)
    assert [g.compute_mode for g in hw.gpus] == ["exclusive_process", "default"]
    with pytest.raises(ConfigError, match=re.escape(
            "invalid backend=direct with 4 GMI(s) on GPU 0: 2 processes, but its compute mode is EXCLUSIVE_PROCESS, "
            "one process a GPU; valid: backend=mps (its daemon is the one process), one process a GPU, or "
            "nvidia-smi -i 0 -c DEFAULT (admin rights)")):
        realise(hw, tmp_path, num_gpus=2, gmis_per_gpu=2)
    plan, _ = realise(hw, tmp_path, num_gpus=2, gmis_per_gpu=1)  # one process each: fine
    assert [g.device for g in plan.gmis] == [0, 1]


def test_a_prohibited_gpu_is_refused_even_to_one_gmi(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"invalid GPU 0 for backend=direct with 1 GMI\(s\): its compute mode is "
                                          r"PROHIBITED, no process may use it; valid: another GPU \(hardware.gpus\)"):
        realise(_exclusive_h100s(2), tmp_path, num_gpus=1, gmis_per_gpu=1)
