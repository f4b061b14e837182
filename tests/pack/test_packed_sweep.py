"""A packed sweep's members held together against what those running at once share (checked in this process)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config

from fakes import nvml as fake_nvml
from gmiexp.errors import ConfigError
from gmiexp.hardware import discover
from gmiexp.pack.launch import PackedSweep
from gmiexp.planner.build import build_plan

# one GMI of Cartpole a member: 20M environments' rollouts take 13.1 GiB, 40M 26.2; an A100 has 40
ONE = ["task=Cartpole", "num_gpus=1", "gmis_per_gpu=1", "train.minibatch_size=1024"]


def sweep(tmp_path: Path, *num_envs: int) -> PackedSweep:
    """A sweep on one (fake) A100 whose members, one a ``num_envs``, were checked alone."""
    hw = discover(fake_nvml.make([fake_nvml.a100_40gb()]))
    plans = [build_plan(compose_config(*ONE, f"num_envs={n}"), tmp_path / str(k), hardware=hw)[0]
             for k, n in enumerate(num_envs)]
    return PackedSweep(params={}, sweep_dir=tmp_path, overrides=[[] for _ in plans], run_dirs=[], configs=[],
                       prefix=[], compose=compose_config, hw=hw, gpus=[0], checked=plans)


def test_members_packed_on_a_gpu_are_held_against_its_memory_together(tmp_path: Path) -> None:
    """Before: each member was held against the whole GPU: 2 of 26.2 GiB packed on 40 GiB were run."""
    s = sweep(tmp_path, 40_000_000, 20_000_000, 40_000_000)
    s.check_at_once(1)
    with pytest.raises(ConfigError, match=r"invalid num_envs: 40000000; valid: at most about 30,\d+,\d+ per GMI with 2 "
                                          r"trainings at once on GPU 0 .*, or fewer members at once "
                                          r"\(hydra\.launcher\.jobs_per_gpu, hydra\.launcher\.gpus\)\. the sweep's "
                                          r"members: 2 of them run at once .* need at least 52\.5 GiB for rollout "
                                          r"buffers alone \(#0 26\.2, #2 26\.2 GiB\)"):
        s.check_at_once(2)


def test_auto_s_choice_is_lowered_to_what_every_member_fits(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """auto profiles the first member (13.1 GiB: 3 fit a GPU); the sweep's larger second one fits 2 at once, with
    the first (before: 3 a GPU ran, and members ran out of the GPU's memory)."""
    s = sweep(tmp_path, 20_000_000, 40_000_000, 20_000_000)
    assert s.fitting(3) == 2
    assert "pack auto: jobs_per_gpu=3 does not fit every member: invalid num_envs: 40000000;" in capsys.readouterr().err
    assert sweep(tmp_path / "small", 20_000_000, 20_000_000, 20_000_000).fitting(3) == 3
