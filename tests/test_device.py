"""train.device: one setting, resolved in one place; bad values exit 2 naming the valid ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gmitest import compose_config

from gmiexp.app import run
from gmiexp.comm.manager import GMIManager
from gmiexp.device import DEVICES, host_staging, resolve_device
from gmiexp.planner.build import build_plan


@pytest.mark.parametrize(("overrides", "expected"), [
    (["train.device=tpu"], "invalid train.device: 'tpu'; valid: auto, cpu, cuda, lazy"),
    (["train.device=cuda", "hardware=cpu"], "invalid train.device: 'cuda'; valid: auto, cpu, lazy"),
])
def test_bad_device_exits_2_and_launches_nothing(overrides: list[str], expected: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code = run(compose_config(*overrides), tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in err
    assert not (tmp_path / "gmis").exists()


def test_cuda_is_accepted_when_planning_for_a_gpu_preset(tmp_path: Path) -> None:
    plan, _ = build_plan(compose_config("mode=plan", "hardware=h100x8", "train.device=cuda"), tmp_path)
    assert plan.train.device == "cuda"


@pytest.mark.parametrize("name", ["auto", "cpu", "lazy"])
def test_every_role_gets_its_device_from_the_manager(name: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    plan, _ = build_plan(compose_config(f"train.device={name}", "gmis_per_gpu=1"), tmp_path)
    want = "cpu" if name == "auto" else name  # auto on a host without a GPU: the CPU
    assert GMIManager(plan, 0).torch_device.type == want == resolve_device(name).type


def test_lazy_is_a_separate_device_that_refuses_host_tensors() -> None:
    dev = resolve_device("lazy")
    x = torch.ones(3, device=dev)
    assert torch.equal((x * 2).cpu(), torch.full((3,), 2.0))  # real values
    with pytest.raises(RuntimeError):
        torch.cat([x, torch.ones(3)]).cpu()  # mixing devices raises, as on CUDA
    assert host_staging(dev) and not host_staging(torch.device("cpu"))
    assert set(DEVICES) == {"auto", "cpu", "cuda", "lazy"}
