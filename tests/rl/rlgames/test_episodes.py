"""The run-wide episode window: G GMIs' meters, merged over gloo, hold the meter of one process seeing every episode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp  # spawn: a clean interpreter per GMI, as the launcher starts them
from gmitest import FAST, run_cli
from rl_games.algos_torch.torch_ext import AverageMeter

from gmiexp.rl.rlgames.episodes import RunWideMeter, gather_over_group
from gmiexp.status import read_history

EPOCHS, STEPS = 3, 7


def finished(epoch: int, step: int, rank: int) -> list[float]:
    """The returns GMI ``rank`` finishes at ``step`` of ``epoch``: 0 to 2 episodes, each value unique."""
    return [1000.0 * epoch + 10.0 * step + rank + j / 8 for j in range((step + rank) % 3)]


def _rank(rank: int, world: int, init: str, windows: list[int], out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        meters = [RunWideMeter(1, w, gather_over_group) for w in windows]
        means: list[list[float]] = [[] for _ in windows]
        for epoch in range(EPOCHS):
            for step in range(STEPS):
                for m in meters:
                    m.update(torch.tensor(finished(epoch, step, rank)).reshape(-1, 1, 1))  # rl-games' shape
            for m, seen in zip(meters, means, strict=True):
                m.merge()
                seen.append(float(m.get_mean()[0]))
        Path(out).write_text(json.dumps([{"means": seen, "size": int(m.current_size),
                                          "local": float(m.local.get_mean()[0])}
                                         for m, seen in zip(meters, means, strict=True)]))
    finally:
        dist.destroy_process_group()


def run_wide(tmp_path: Path, world: int, windows: list[int]) -> list[list[dict]]:
    """Every GMI's figures per window: ``[gmi][window]``."""
    outs = [tmp_path / f"rank{r}.json" for r in range(world)]
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_rank, args=(r, world, f"file://{tmp_path / 'rdzv'}", windows, str(outs[r])))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return [json.loads(o.read_text()) for o in outs]


def one_process(world: int, window: int) -> tuple[list[float], list[float]]:
    """rl-games' meter of one process stepping every GMI's environments (at each step: GMI 0's episodes first),
    and every episode in the order they ended."""
    meter, every, means = AverageMeter(1, window), [], []
    for epoch in range(EPOCHS):
        for step in range(STEPS):
            done = [v for r in range(world) for v in finished(epoch, step, r)]
            every += done
            meter.update(torch.tensor(done).reshape(-1, 1, 1))
        means.append(float(meter.get_mean()[0]))
    return means, every


@pytest.mark.parametrize("world", [2, 4])
def test_run_wide_mean_is_the_mean_of_the_runs_last_episodes(world: int, tmp_path: Path) -> None:
    big, small = 10_000, 5  # more than every episode of the run; a window the run overflows
    got = run_wide(tmp_path, world, [big, small])
    # the window holds every episode so far: the exact mean of every GMI's episodes
    _, every = one_process(world, big)
    for g in got:
        assert g[0]["means"][-1] == pytest.approx(sum(every) / len(every), rel=1e-6)
        assert g[0]["size"] == len(every)
    # overflowed: every GMI holds the meter one process seeing all episodes holds, bit for bit
    want, every = one_process(world, small)
    assert len(every) > 3 * small
    for g in got:
        assert g[1]["means"] == want
    # each GMI's own window stays its own (reported as gmi/<id>/reward/mean)
    assert len({g[0]["local"] for g in got}) == world


def test_one_gmi_meter_is_rl_games_meter_update_for_update() -> None:
    torch.manual_seed(0)
    ours, theirs = RunWideMeter(2, 16, gather=None), AverageMeter(2, 16)
    for _ in range(50):
        values = torch.randn(int(torch.randint(0, 4, ())), 1, 2)
        ours.update(values)
        theirs.update(values)
        ours.merge()  # a no-op without a group
        assert torch.equal(ours.mean, theirs.mean) and ours.current_size == theirs.current_size


@pytest.fixture(scope="module")
def fixed_policy_returns(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict]:
    """1 and 4 GMIs on one global batch of 64 cart-poles with a policy that never changes (no learning rate,
    no input normaliser): the summaries. One process against the finest partition the tests need (4 GMIs, which
    the run-wide test reads); a 2-GMI run would take the same merge over gloo again (~13 s more)."""
    out = {}
    for gmis in (1, 4):
        run_dir = tmp_path_factory.mktemp(f"fixed{gmis}")
        r = run_cli(*FAST, f"hydra.run.dir={run_dir}", f"gmis_per_gpu={gmis}", "batch.total_envs=64",
                    "max_iterations=6", "train.learning_rate=0", "train.normalize_input=false", "seed=3")
        assert r.returncode == 0, r.stderr[-3000:]
        out[gmis] = json.loads((run_dir / "summary.json").read_text())
    return out


def test_a_fixed_policys_return_does_not_depend_on_the_partition(fixed_policy_returns: dict[int, dict]) -> None:
    one = fixed_policy_returns[1]["metrics"]["reward/mean"]
    assert one > 5  # a random cart-pole policy balances ~20 steps (reward 1 each)
    for gmis, s in fixed_policy_returns.items():
        m = s["metrics"]
        assert s["history"][-1]["frames"] == 6 * 64 * 16
        # a random policy's episode returns spread by about half their mean; 100 episodes' means by about 5%
        assert m["reward/mean"] == pytest.approx(one, rel=0.2), (gmis, m["reward/mean"], one)
        assert {k for k in m if k.startswith("gmi/")} == {f"gmi/{g}/reward/mean" for g in range(gmis)}


def test_every_gmi_reports_the_run_wide_return(fixed_policy_returns: dict[int, dict]) -> None:
    """Before the run-wide window each GMI reported its own last 100 episodes; now each holds the same figure."""
    run_dir = Path(fixed_policy_returns[4]["run_dir"])
    per_gmi = [[r["reward/mean"] for r in read_history(run_dir, g)] for g in range(4)]
    assert per_gmi[0] == per_gmi[1] == per_gmi[2] == per_gmi[3]
    own = [read_history(run_dir, g)[-1]["gmi/reward/mean"] for g in range(4)]
    assert len(set(own)) > 1  # while each GMI's own window differs
