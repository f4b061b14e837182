"""The rollout footprint is checked against the memory a GMI has: its GPU's, or its MIG instance's."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config

from fakes import nvml as fake_nvml
from gmiexp.errors import ConfigError
from gmiexp.hardware import discover
from gmiexp.planner.build import build_plan

# Cartpole's rollout: 16 steps x 704 bytes an environment; 8M environments a GMI need 5.2 GiB, a 1g.5gb has 4.8
MIG = ["task=Cartpole", "backend=mig", "num_gpus=1", "gmis_per_gpu=2", "train.minibatch_size=1024"]


def test_a_gmi_on_a_mig_instance_has_the_instance_s_memory_not_its_gpu_s(tmp_path: Path) -> None:
    """Before: two 5.2 GiB rollouts were held against the A100's 40 GiB and planned."""
    hw = discover(fake_nvml.make([fake_nvml.a100_40gb(mig=1, migs=fake_nvml.a100_migs("1g.5gb", 2, 4864))]))
    plan, _ = build_plan(compose_config(*MIG, "num_envs=5000000"), tmp_path / "a", hardware=hw)
    assert [g.num_envs for g in plan.gmis] == [5_000_000, 5_000_000]
    with pytest.raises(ConfigError, match=r"invalid num_envs: 8000000; valid: at most about 7,244,706 per GMI .*"
                                          r"on MIG instance 1g\.5gb MIG-\S+ of GPU 0 need at least 5\.2 GiB"):
        build_plan(compose_config(*MIG, "num_envs=8000000"), tmp_path / "b", hardware=hw)
