"""Plans and hardware the backend tests share."""

from __future__ import annotations

from pathlib import Path

from fakes import nvml as fake_nvml
from gmiexp.backends import get
from gmiexp.config import LayoutConfig
from gmiexp.config.schema import BACKEND_SCHEMAS
from gmiexp.hardware import Hardware, discover, preset
from gmiexp.layouts import LAYOUTS
from gmiexp.layouts.layout import LayoutRequest
from gmiexp.plan import Plan


def plan_for(hw: Hardware, num_gpus: int = 1, gmis_per_gpu: int = 2, layout: str = "tcg_ex") -> Plan:
    req = LayoutRequest(layout=LayoutConfig(), hardware=hw, num_gpus=num_gpus, gmis_per_gpu=gmis_per_gpu,
                        num_envs=64)
    plan = LAYOUTS.get("tcg_ex")().build(req)
    plan.layout = layout
    return plan


def realise(hw: Hardware, run_dir: Path, num_gpus: int = 1, gmis_per_gpu: int = 2, layout: str = "tcg_ex",
            **cfg) -> tuple[Plan, object]:
    backend = get(BACKEND_SCHEMAS[cfg.get("name", "direct")](**cfg), hw)
    plan = plan_for(hw, num_gpus, gmis_per_gpu, layout)
    return backend.realise(plan, run_dir), backend


def nvml_host(*gpus: fake_nvml.FakeGPU) -> Hardware:
    return discover(fake_nvml.make(list(gpus)))


def a100() -> Hardware:
    return preset("dgx_a100")
