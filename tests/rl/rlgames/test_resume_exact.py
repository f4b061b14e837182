"""A tcg_ex run stopped and resumed is the run never stopped, bit for bit (rl-games, torch cart-pole; issue 42).

A run trains 4 epochs straight (``S``, which also leaves its epoch-2 checkpoint mid-run); another stops at epoch 2
(``R``) and the same command, 4 epochs long, goes on in its run dir (a requeue, ``launch.resume=auto``); a third
starts from ``S``'s epoch-2 checkpoint in a new run dir (``checkpoint=``). The resumed runs' weights, Adam state,
normalisers, counters, episode means and every learning figure of epochs 3-4 (returns, losses, KL, learning rate)
equal ``S``'s bit for bit, with 1 GMI and with 2. Before the checkpoint held the run (generator states, the
simulator, the agent's observations and running episodes), a resume replayed epoch 0's streams and reset every
environment; all four cases failed alike: 'after a requeue: 12 of 14 weight tensors differ (value_mean_std.running_mean,
...); 16 Adam state tensors differ; ... episode means game_rewards: size 76 != 100' (the return window came back
empty: a shape check in its restore).

The runs go through the CLI's own path in this process (:func:`gmiexp.app.run_job`): every GMI is a process of
its own, forked warm; the default suite runs the 2-GMI case, the 1-GMI case is slow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from gmitest import compose_config

from gmiexp.app import run_job
from gmiexp.rl.rlgames.checkpoint import EPISODES_KEY

RUN = ["task=Cartpole", "num_envs=32", "train.horizon_length=16", "train.minibatch_size=256", "train.mini_epochs=2",
       "train.torch_threads=1", "seed=7", "train.save_frequency=2", "launch.progress=false"]
EPOCHS, STOP = 4, 2
#: what a history row says about the learning (not the clock)
LEARNED = ("frames", "reward/mean", "episode/length", "loss/actor", "loss/critic", "loss/entropy", "train/kl",
           "train/lr", "train/clip_frac", "train/grad_norm")


def train(run_dir: Path, gmis: int, *extra: str) -> dict[str, Any]:
    code, summary = run_job(compose_config(*RUN, f"gmis_per_gpu={gmis}", f"hydra.run.dir={run_dir}", *extra),
                            run_dir)
    assert code == 0 and summary is not None, f"run in {run_dir} exited {code}"
    return summary


def checkpoint(run_dir: Path, epoch: int) -> Path:
    """The run's checkpoint of ``epoch`` (the newest of that epoch's files: they hold the same state)."""
    found = sorted((run_dir / "rl_games" / "run" / "nn").glob(f"last_*_ep_{epoch}_*.pth"),
                   key=lambda p: p.stat().st_mtime)
    assert found, f"no epoch-{epoch} checkpoint in {run_dir}"
    return found[-1]


def learned(summary: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Every epoch's learning figures, the run-wide return and each GMI's own included."""
    return {row["iteration"]: {k: v for k, v in row.items() if k in LEARNED or k.endswith("/reward/mean")}
            for row in summary["history"]}


def differences(got: Path, want: Path) -> list[str]:
    """What of two checkpoints differs: weights and normalisers, Adam, counters, schedule, episode means."""
    a, b = (torch.load(p, map_location="cpu", weights_only=False) for p in (got, want))
    out = []
    weights = [k for k in b["model"] if not torch.equal(a["model"][k], b["model"][k])]
    if weights:
        out.append(f"{len(weights)} of {len(b['model'])} weight tensors differ ({', '.join(weights[:3])} ...)")
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    adam = [f"{i}.{k}" for i in sb for k in sb[i] if not torch.equal(torch.as_tensor(sa[i][k]),
                                                                     torch.as_tensor(sb[i][k]))]
    if adam:
        out.append(f"{len(adam)} Adam state tensors differ ({', '.join(adam[:3])} ...)")
    for key in ("epoch", "frame", "gmiexp_schedule"):
        if a.get(key) != b.get(key):
            out.append(f"{key}: {a.get(key)} != {b.get(key)}")
    for name, meter in b[EPISODES_KEY].items():
        other = a[EPISODES_KEY][name]
        if meter["size"] != other["size"] or not torch.equal(meter["mean"], other["mean"]):
            out.append(f"episode means {name}: {other} != {meter}")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    """Per GMI count, the straight run and the stopped one, made once for both resume paths."""
    made: dict[int, dict[str, Any]] = {}

    def get(gmis: int) -> dict[str, Any]:
        if gmis not in made:
            root = tmp_path_factory.mktemp(f"resume{gmis}")
            straight = train(root / "straight", gmis, f"max_iterations={EPOCHS}")
            stopped = root / "stopped"
            train(stopped, gmis, f"max_iterations={STOP}")
            made[gmis] = {"root": root, "straight": straight, "stopped": stopped}
        return made[gmis]

    return get  # type: ignore[return-value]


def check_same_run(resumed: dict[str, Any], resumed_dir: Path, straight: dict[str, Any], path: str) -> None:
    assert [row["iteration"] for row in resumed["history"]] == list(range(STOP + 1, EPOCHS + 1)), path
    diff = differences(checkpoint(resumed_dir, EPOCHS), checkpoint(Path(straight["run_dir"]), EPOCHS))
    assert not diff, f"after {path}: " + "; ".join(diff)
    want = {e: row for e, row in learned(straight).items() if e > STOP}
    got = learned(resumed)
    assert got == want, f"after {path}: the epochs' learning figures differ: {got} != {want}"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("gmis", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_a_requeued_run_is_the_run_never_stopped(gmis: int, runs: Any, no_orphans: None) -> None:
    r = runs(gmis)
    resumed = train(r["stopped"], gmis, f"max_iterations={EPOCHS}")  # the same command, longer, in its run dir
    check_same_run(resumed, r["stopped"], r["straight"], "a requeue")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("gmis", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_a_run_from_its_checkpoint_is_the_run_never_stopped(gmis: int, runs: Any, no_orphans: None) -> None:
    r = runs(gmis)
    mid = checkpoint(Path(r["straight"]["run_dir"]), STOP)  # written mid-run by the straight run itself
    run_dir = r["root"] / "from_checkpoint"
    resumed = train(run_dir, gmis, f"max_iterations={EPOCHS}", f"checkpoint={mid}")
    check_same_run(resumed, run_dir, r["straight"], "checkpoint=")



@pytest.mark.slow  # slow: envpool's import in every GMI (the default suite checks the rule in test_runstate.py)
@pytest.mark.timeout(600)
def test_a_requeued_envpool_run_seeds_fresh_episodes_and_says_how_many_were_cut(tmp_path: Path,
                                                                                 no_orphans: None) -> None:
    run = ["task=CartPoleEnvpool"]
    train(tmp_path, 2, *run, f"max_iterations={STOP}")
    resumed = train(tmp_path, 2, *run, f"max_iterations={EPOCHS}")
    reports = [resumed["gmis"][str(i)]["resume"] for i in range(2)]
    cut, frames = reports[0]["episodes_cut"], reports[0]["frames_cut"]
    assert all(r["segment"] == 1 and r["restored"] and not r["simulator"] and r["episodes_cut"] == cut
               and r["frames_cut"] == frames for r in reports), reports
    assert 0 < cut <= 64 and cut <= frames and [r["env_seed"] for r in reports] == [7 + 64, 7 + 64 + 32]
    said = [line for log in tmp_path.glob("logs/**/*.log") for line in log.read_text().splitlines()
            if line.startswith("gmiexp: resumed")]
    assert said == [f"gmiexp: resumed after epoch {STOP} (segment 1): generators restored, but the simulator cannot "
                    f"save its state; {cut} episodes in progress were cut ({frames} frames; the environments start "
                    "new ones from segment 1's seeds)"], said
