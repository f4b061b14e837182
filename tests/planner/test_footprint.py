"""The rollout footprint is checked against the memory a GMI has: its GPU's, or its MIG instance's."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config

from fakes import nvml as fake_nvml
from gmiexp.errors import ConfigError
from gmiexp.hardware import discover
from gmiexp.planner.build import build_plan
from gmiexp.planner.footprint import check_together

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


# one GMI of Cartpole a training: 20M environments' rollouts take 13.1 GiB, 40M 26.2; an A100 has 40
ONE = ["task=Cartpole", "num_gpus=1", "gmis_per_gpu=1", "train.minibatch_size=1024"]


def test_trainings_sharing_a_gpu_are_held_against_its_memory_together(tmp_path: Path) -> None:
    """Each alone fits the A100; the ``at_once`` largest together must too (before: each was held against the whole
    GPU, and 2 of 26.2 GiB packed on its 40 GiB were planned)."""
    hw = discover(fake_nvml.make([fake_nvml.a100_40gb()]))
    small, _ = build_plan(compose_config(*ONE, "num_envs=20000000"), tmp_path / "s", hardware=hw)
    big, _ = build_plan(compose_config(*ONE, "num_envs=40000000"), tmp_path / "b", hardware=hw)
    check_together([small, big, small], hw, 2, "the members", "fewer")  # 39.3 GiB
    check_together([big, big, big], hw, 1, "the members", "fewer")  # one at a time
    with pytest.raises(ConfigError, match=r"invalid num_envs: 40000000; valid: at most about 30,\d+,\d+ per GMI with "
                                          r"2 trainings at once on GPU 0 \(NVIDIA A100-SXM4-40GB\), or fewer\. the "
                                          r"members: 2 of them run at once on GPU 0 .* and need at least 52\.5 GiB for "
                                          r"rollout buffers alone \(26\.2, 26\.2 GiB\); .* has 40\.0 GiB"):
        check_together([small, big, big], hw, 2, "the members", "fewer")


def test_trainings_on_mig_instances_are_each_held_against_their_own(tmp_path: Path) -> None:
    hw = discover(fake_nvml.make([fake_nvml.a100_40gb(mig=1, migs=fake_nvml.a100_migs("3g.20gb", 2, 19968))]))
    plan, _ = build_plan(compose_config(*MIG, "gmis_per_gpu=1", "num_envs=20000000"), tmp_path, hardware=hw)
    check_together([plan, plan], hw, 2, "the members", "fewer")  # 13.1 GiB each, on an instance of 19.5 each
