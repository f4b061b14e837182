"""rl-games PPO in GMIs: models stay identical, checkpoints resume, seeds reproduce, reward rises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gmitest import FAST, gmiexp_workers, run_cli

from gmiexp.status import read_history


def digests(run_dir: Path, gmi: int) -> list[str]:
    return [r["sync/digest"] for r in read_history(run_dir, gmi)]


def train(run_dir: Path, *extra: str, timeout: float = 240) -> dict:
    r = run_cli(*FAST, "train.check_sync=true", f"hydra.run.dir={run_dir}", *extra, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1].startswith("gmiexp ok:")
    return json.loads((run_dir / "summary.json").read_text())


#: the 2-GMI Cartpole run the tests below share (one launch): long enough for the reward to rise
ITERS, ENVS = 30, 64


@pytest.fixture(scope="module")
def two_gmis(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """2 GMIs train Cartpole for :data:`ITERS` epochs (``train.check_sync``): the run dir and its summary."""
    run_dir = tmp_path_factory.mktemp("two_gmis") / "run"
    try:
        s = train(run_dir, "gmis_per_gpu=2", f"max_iterations={ITERS}", f"num_envs={ENVS}", timeout=300)
    finally:
        left = gmiexp_workers(run_dir)
        for p in left:
            p.kill()
    assert not left, f"orphan GMI workers left behind: {[p.pid for p in left]}"
    return run_dir, s


def test_two_gmis_keep_weights_and_normalisers_identical(two_gmis: tuple[Path, dict]) -> None:
    tmp_path, s = two_gmis
    d0, d1 = digests(tmp_path, 0), digests(tmp_path, 1)
    assert len(d0) == ITERS and d0 == d1
    assert len(set(d0)) == ITERS  # the model changed every epoch
    m = s["metrics"]
    assert m["perf/env_steps_per_s"] > 0 and m["time/comm_s"] > 0
    assert set(s["gmis"]) == {"0", "1"}
    # frames are counted globally: epochs x 2 GMIs x envs x 16 steps
    assert s["history"][-1]["frames"] == ITERS * 2 * ENVS * 16
    # only GMI 0 writes rl-games' TensorBoard logs
    assert list((tmp_path / "rl_games").glob("run/summaries/events*"))
    # the last checkpoint carries the episode means the run reported last, for a restart to go on from
    import torch

    from gmiexp.rl.rlgames.checkpoint import EPISODES_KEY

    (last,) = (tmp_path / "rl_games" / "run" / "nn").glob("last_*.pth")
    episodes = torch.load(last, map_location="cpu", weights_only=False)[EPISODES_KEY]
    assert episodes["game_rewards"]["size"] > 0
    assert float(episodes["game_rewards"]["mean"][0]) == pytest.approx(s["history"][-1]["reward/mean"])


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_same_seed_same_weights_other_seed_differs(tmp_path: Path) -> None:
    a = tmp_path / "a"
    b = tmp_path / "b"
    c = tmp_path / "c"
    for d, seed in ((a, 3), (b, 3), (c, 4)):
        train(d, "gmis_per_gpu=1", "max_iterations=2", f"seed={seed}")
    assert digests(a, 0) == digests(b, 0)
    assert digests(a, 0)[-1] != digests(c, 0)[-1]


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_resume_from_checkpoint_continues(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    s1 = train(first, "gmis_per_gpu=2", "max_iterations=3")
    ckpts = sorted((first / "rl_games" / "run" / "nn").glob("last_*.pth"))
    assert ckpts, list((first / "rl_games").rglob("*"))
    s2 = train(second, "gmis_per_gpu=2", "max_iterations=5", f"checkpoint={ckpts[-1]}")
    h = s2["history"]
    assert [r["iteration"] for r in h] == [4, 5]
    assert h[0]["frames"] == s1["history"][-1]["frames"] + 2 * 32 * 16
    assert digests(second, 0) == digests(second, 1)


def test_reward_rises_on_cartpole(two_gmis: tuple[Path, dict]) -> None:
    _, s = two_gmis
    rewards = [r["reward/mean"] for r in s["history"] if r["reward/mean"] is not None]
    early = sum(rewards[:3]) / 3
    late = sum(rewards[-3:]) / 3
    assert late > 2 * early and late > 60, (early, late)


def last_weights(run_dir: Path) -> dict:
    import torch

    ckpt = sorted((run_dir / "rl_games" / "run" / "nn").glob("last_*.pth"))[-1]
    return torch.load(ckpt, map_location="cpu", weights_only=False)["model"]


@pytest.mark.slow  # slow: the default suite keeps a run of this path elsewhere (docs/development.md)
def test_har_on_2x2_keeps_gmis_identical_and_matches_allreduce(tmp_path: Path, no_orphans: None) -> None:
    import torch

    runs = {}
    for red in ("har", "allreduce"):
        d = tmp_path / red
        s = train(d, "num_gpus=2", "gmis_per_gpu=2", "max_iterations=3", f"reduction={red}")
        assert s["config"]["reduction"] == red
        ds = [digests(d, g) for g in range(4)]
        assert all(x == ds[0] for x in ds), f"{red}: GMIs diverged"
        runs[red] = last_weights(d)
    har, ref = runs["har"], runs["allreduce"]
    assert har.keys() == ref.keys()
    for k in ref:
        # same gradients up to float32 summation order: step-for-step equal within rounding
        torch.testing.assert_close(har[k], ref[k], rtol=1e-4, atol=1e-5, msg=k)
