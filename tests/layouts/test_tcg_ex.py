from __future__ import annotations

import pytest

from gmiexp.config import LayoutConfig
from gmiexp.errors import ConfigError
from gmiexp.hardware import preset
from gmiexp.layouts import get
from gmiexp.layouts.layout import LayoutRequest


def req(gpus: int, per: int, envs: int = 16, hw: str = "cpu") -> LayoutRequest:
    return LayoutRequest(layout=LayoutConfig(name="tcg_ex"), hardware=preset(hw), num_gpus=gpus,
                         gmis_per_gpu=per, num_envs=envs)


def test_holistic_gmis_on_logical_gpus() -> None:
    plan = get("tcg_ex").build(req(2, 3))
    assert [g.device for g in plan.gmis] == [0, 0, 0, 1, 1, 1]
    assert [g.local_index for g in plan.gmis] == [0, 1, 2, 0, 1, 2]
    assert all(g.roles == ["simulator", "agent", "trainer"] for g in plan.gmis)
    assert plan.trainer_group == list(range(6))
    assert plan.gpu_map() == [[0, 1, 2], [3, 4, 5]]


def test_more_gpus_than_the_host_has() -> None:
    with pytest.raises(ConfigError, match="invalid num_gpus: 9; valid: 1..8"):
        get("tcg_ex").build(req(9, 1, hw="dgx_a100"))


def test_unknown_layout() -> None:
    with pytest.raises(ConfigError, match="invalid layout: 'ring'"):
        get("ring")
