"""rsl_rl members exploit too (issue 43's done-means): 3 ``train=rslrl`` members of the tests' own rsl_rl VecEnv run 3
intervals; each underperformer takes a leader's published learning of that interval in its own process (no member
starts twice, its GMI's pid unchanged), at the interval's boundary (no frame thrown away), goes on with the mutated
PPO fields, and every member writes rsl_rl's checkpoint at every interval's end. A bad key exits 2 before launch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from gmitest import compose_config, run_cli
from pbt_checks import events, exploits_in_place

from gmiexp.app import run_job
from gmiexp.plan import Plan
from gmiexp.planner.resources import full_state_bytes, pages
from gmiexp.rl import exploit
from gmiexp.shm.cleanup import leftovers
from gmiexp.status import read_history

ENVS, STEPS = 8, 16  # PointMass's episodes are 16 steps: every environment ends one in each iteration
EPOCH_FRAMES = ENVS * STEPS
RSLRL = ["train=rslrl", "task=Cartpole", "task.vec_env=rslrl_vecenv:make", f"batch.total_envs={ENVS}",
         f"+train.rslrl.num_steps_per_env={STEPS}", "train.device=cpu", "launch.progress=false", "num_gpus=1",
         "gmis_per_gpu=1", "max_iterations=3"]
POPULATION = [*RSLRL, "pbt=rslrl", "pbt.population=3", f"pbt.interval_steps={EPOCH_FRAMES}", "pbt.threshold_std=0",
              "pbt.threshold_abs=0", "+pbt.init={train.rslrl.algorithm.learning_rate:[1e-5,1e-2]}",
              "pbt.mutation_rate=1"]


# in the default suite: the done-means item "rsl_rl members exploit too" (3 members of a torch VecEnv, no simulator)
@pytest.mark.timeout(900)
def test_three_rsl_rl_members_run_three_intervals_and_underperformers_take_a_leaders_learning_in_place(
        tmp_path: Path) -> None:
    r = run_cli(*POPULATION, "pbt.exploit=inplace", f"hydra.run.dir={tmp_path}", timeout=850)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "gmiexp pbt ok: 3 members" in r.stdout
    ev = events(tmp_path)
    exploits = exploits_in_place(ev, 3, 3, EPOCH_FRAMES)
    for d, t, life in exploits:
        # every value mutated (rate 1): rsl_rl's keys only, the rate the member's checkpoint after it holds
        assert t["values"] == d["values"] and all(k.startswith("train.rslrl.algorithm.") for k in d["values"])
        assert d["values"] != d["values_taken"]
        ack = next(a for a in exploit.acks(life) if a["id"] == d["id"])
        ckpt = torch.load(life / "rsl_rl" / f"model_{d['interval'] - 1}.pt", map_location="cpu", weights_only=False)
        assert ckpt["optimizer_state_dict"]["param_groups"][0]["lr"] == ack["learning_rate"]
        history = read_history(life)
        assert [h["frames"] for h in history] == [EPOCH_FRAMES * k for k in (1, 2, 3)]  # its counters its own
    starts = [e for e in ev if e["event"] == "start"]
    for s in starts:  # a checkpoint at every interval's end (train.save_frequency), rsl_rl's name
        assert {p.name for p in (Path(s["run_dir"]) / "rsl_rl").glob("model_*.pt")} == {
            "model_0.pt", "model_1.pt", "model_2.pt"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["exploits"] == len(exploits) and all(m["lives"] == 1 for m in summary["members"])
    assert Path(summary["best"]["checkpoint"]).name.startswith("model_")
    tag = next(e for e in ev if e["event"] == "population")["tag"]
    assert tag and leftovers(tag) == []  # every published state removed
    # the space the population's /dev/shm check counts for a state: rsl_rl's actor and critic (before: rl-games'
    # count of the task's network, a hundredth of it)
    lives = [Path(s["run_dir"]) for s in starts]
    counted = pages(full_state_bytes(Plan.load(lives[0] / "plan.yaml")))
    sizes = [pages(int(r["bytes"])) for life in lives for r in exploit.published_records(life)]
    assert sizes and all(counted / 2 <= b <= counted for b in sizes), (counted, sizes)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_three_rsl_rl_members_restart_from_a_leaders_checkpoint(tmp_path: Path) -> None:
    r = run_cli(*POPULATION, "pbt.exploit=restart", f"hydra.run.dir={tmp_path}", timeout=1400)
    assert r.returncode == 0, r.stderr[-3000:]
    ev = events(tmp_path)
    decisions = [e for e in ev if e["event"] == "decision" and e.get("copies")]
    assert decisions
    for d in decisions:
        assert Path(d["checkpoint"]).name == f"model_{d['source_interval'] - 1}.pt"
    for s in (e for e in ev if e["event"] == "start" and e["checkpoint"]):
        start = torch.load(Path(s["run_dir"]) / "start.pth", map_location="cpu", weights_only=False)
        assert start["infos"]["gmiexp_run"].keys() == {"segment"}  # the source's learning, not its run
        lr = s["values"].get("train.rslrl.algorithm.learning_rate")
        assert [g["lr"] for g in start["optimizer_state_dict"]["param_groups"]] == [lr]
        first = read_history(Path(s["run_dir"]))[0]
        assert first["frames"] == s["frames"] + EPOCH_FRAMES  # its frames go on from the source's


@pytest.mark.parametrize(("override", "named"), [
    ("pbt=default", "invalid pbt.mutation key for rsl_rl's (train=rslrl) members: 'train.learning_rate'; valid: "
                    "train.rslrl.algorithm.learning_rate"),
    ("+pbt.init={train.e_clip:[0.1,0.3]}", "invalid pbt.init key for rsl_rl's (train=rslrl) members: 'train.e_clip'"),
])
def test_a_key_rsl_rl_members_do_not_read_exits_2_before_any_member_starts(override: str, named: str,
                                                                           tmp_path: Path, capsys) -> None:
    cfg = compose_config(*RSLRL, "pbt=rslrl", "pbt.population=3", override, f"hydra.run.dir={tmp_path}")
    code, _ = run_job(cfg, tmp_path)
    assert code == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "members").exists() and not (tmp_path / "pbt").exists()


@pytest.mark.slow  # mjlab's import and MuJoCo Warp's first steps: about a minute on 2 cores
@pytest.mark.timeout(900)
def test_mjlab_recipe_members_exploit_in_place(tmp_path: Path) -> None:
    """docs/pbt.md's mjlab command, small: 2 members of an mjlab recipe, each underperformer's copy taken in place."""
    pytest.importorskip("mjlab", reason="needs gmiexp[mjlab] (make venv installs it)")
    envs, steps, iters = 16, 32, 5  # the first episodes end (the pole falls) past 100 steps: a record from then on
    r = run_cli("train=rslrl", "task=Mjlab-Cartpole-Balance", "pbt=rslrl", "pbt.population=2", f"num_envs={envs}",
                "num_gpus=1", "gmis_per_gpu=1", f"+train.rslrl.num_steps_per_env={steps}", f"max_iterations={iters}",
                f"pbt.interval_steps={envs * steps}", "pbt.threshold_std=0", "pbt.threshold_abs=0",
                "pbt.mutation_rate=1", "+pbt.init={train.rslrl.algorithm.learning_rate:[1e-5,1e-2]}",
                "launch.progress=false", f"hydra.run.dir={tmp_path}", timeout=850)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "minibatch_size" not in r.stderr  # rl-games' key: not an rsl_rl run's warning
    for d, _, life in exploits_in_place(events(tmp_path), 2, iters, envs * steps):
        ack = next(a for a in exploit.acks(life) if a["id"] == d["id"])
        ckpt = torch.load(life / "rsl_rl" / f"model_{d['interval'] - 1}.pt", map_location="cpu", weights_only=False)
        assert ckpt["optimizer_state_dict"]["param_groups"][0]["lr"] == ack["learning_rate"]
        # mjlab's runner's own record: the member's environments (their curricula's counter) ran on through the copy
        assert ckpt["infos"]["env_state"]["common_step_counter"] == d["interval"] * steps
