"""The planner's sizes are the sizes of what the real code makes: the segments tmpfs gives, the checkpoints written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gmitest import cli_env, compose_config, run_cli

from gmiexp.comm.channels import make_channel_set
from gmiexp.comm.channels.ring import SlotRing
from gmiexp.envs import task_dims
from gmiexp.plan import Plan
from gmiexp.planner.build import build_plan
from gmiexp.planner.resources import board_segment, checkpoint_bytes, ring_segment, shm_need
from gmiexp.rl.experience.weights import WeightBoard
from gmiexp.rl.rlgames.policy import Spaces, experience_fields
from gmiexp.shm.names import SHM_DIR


def taken(name: str) -> int:
    """Bytes ``/dev/shm`` gave the segment ``name`` (its pages: segments are fallocated when created)."""
    return os.stat(SHM_DIR / name).st_blocks * 512


@pytest.mark.parametrize(("n_slots", "slot_bytes"), [(1, 1), (2, 64), (3, 1000), (8, 4096 - 128), (64, 12345)])
def test_a_rings_estimate_is_the_segment_slot_ring_creates(tag: str, n_slots: int, slot_bytes: int) -> None:
    ring = SlotRing.create("r", n_slots, slot_bytes, tag=tag)
    try:
        assert ring_segment(n_slots, slot_bytes) == taken(ring.spec.name)
    finally:
        ring.close()


@pytest.mark.parametrize("nbytes", [4, 12, 4096 - 60, 4096, 123460])  # a state: 4-byte words
def test_a_weight_boards_estimate_is_the_segment_weight_board_creates(tag: str, nbytes: int) -> None:
    board = WeightBoard.create("w", nbytes, tag=tag)
    try:
        assert board_segment(nbytes) == taken(board.name)
    finally:
        board.close()


@pytest.mark.parametrize("overrides", [["channel=multi"], ["channel=uni"], ["channel=multi", "task=Cartpole"],
                                       ["channel=multi", "channel.target_bytes=3000", "train.horizon_length=12"]])
def test_a_plans_channel_estimate_is_the_rings_its_agents_create(tag: str, tmp_path: Path,
                                                                 overrides: list[str]) -> None:
    """Every agent's channel set, created as rl/experience/agent_loop.py does, takes what shm_need says."""
    cfg = compose_config("layout=tdg_ex", "mode=plan", "gmis_per_gpu=3", "num_envs=8", "channel.slots=3",
                         "channel.target_bytes=4096", *overrides)
    plan, _ = build_plan(cfg, tmp_path)
    assert plan.channel is not None and plan.channels
    obs, act = task_dims(plan.task)
    fields = experience_fields(Spaces((obs,), plan.task.continuous, act), list(plan.channel.fields))
    horizon = plan.train.horizon_length
    sets = []
    try:
        for a, t in plan.channels:
            n = plan.gmi(a).num_envs
            sets.append(make_channel_set(plan.channel.name, fields, rows_per_step=n,
                                         target_bytes=plan.channel.target_bytes, n_slots=plan.channel.slots,
                                         name=f"exp{a}to{t}", tag=tag, on_full=plan.channel.on_full,
                                         batch_rows=(horizon + 1) * n))  # the steps and the bootstrap record
        assert shm_need(plan).items["channels"] == sum(taken(r.spec.name) for cs in sets for r in cs.rings)
    finally:
        for cs in sets:
            cs.close()


def test_the_planners_sizes_import_no_torch() -> None:
    """mode=plan sizes /dev/shm from the layouts the segments use, without importing what runs them."""
    code = "import sys, gmiexp.planner.resources; print(sorted(m for m in ('torch', 'rl_games') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=cli_env())
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"


@pytest.mark.parametrize("overrides", [["task=Cartpole", "num_envs=1024"],  # the torch cart-pole saves its state
                                       ["task=Ant", "num_envs=64"]])  # envpool saves none
def test_a_checkpoints_estimate_is_the_size_of_the_checkpoints_a_run_writes(tmp_path: Path,
                                                                            overrides: list[str]) -> None:
    """tcg_ex's checkpoints hold every GMI's run record (per environment its episode and simulator state): before,
    only the learning state was counted, a twentieth of a 4096-environment cart-pole's checkpoint."""
    r = run_cli(*overrides, "num_gpus=1", "gmis_per_gpu=2", "max_iterations=1", "train.save_frequency=1",
                "launch.progress=false", f"hydra.run.dir={tmp_path}", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    sizes = [p.stat().st_size for p in tmp_path.glob("rl_games/*/nn/*.pth")]
    estimate = checkpoint_bytes(Plan.load(tmp_path / "plan.yaml"))
    assert sizes and all(0.9 * estimate <= s <= 1.1 * estimate for s in sizes), (estimate, sizes)
