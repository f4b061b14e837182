"""Hand-checked numerics of the gradient reduction and the group normalisers."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from gmitest import FAST, gmiexp_workers, run_cli
from reduction_helpers import run_gmis
from rl_games.algos_torch.running_mean_std import RunningMeanStd, RunningMeanStdObs
from torch import nn

from gmiexp.plan.minibatch import fit_minibatch
from gmiexp.rl.rlgames.sync import (
    GroupRunningMeanStd,
    group_normalisers,
    reduce_gradients,
    step_without_rows,
)


def stats_module(data: torch.Tensor) -> RunningMeanStd:
    m = RunningMeanStd((data.shape[1],))
    m.train()
    m(data)
    return m


def test_group_normalisers_from_a_restored_normaliser_equal_one_process() -> None:
    """rl-games' normaliser restored with a large count (100,000 rows of N(0,1)), each of 2 GMIs adding 10,000
    rows of N(1,1): both end where one process adding all 20,000 ends (mean ~0.165, var ~1.14; the merge this
    replaced counted the start twice: 0.089 / 1.086)."""
    torch.manual_seed(0)
    start = stats_module(torch.randn(100_000, 3))
    adds = [torch.randn(10_000, 3) + 1, torch.randn(10_000, 3) + 1]
    one = copy.deepcopy(start)
    one(torch.cat(adds))
    def gmi(i: int, all_reduce: Callable[[torch.Tensor], None]) -> GroupRunningMeanStd:
        m = GroupRunningMeanStd(copy.deepcopy(start), all_reduce)
        m.train()
        m(adds[i])
        return m

    for m in run_gmis(2, gmi):
        torch.testing.assert_close(m.running_mean, one.running_mean, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(m.running_var, one.running_var, rtol=1e-5, atol=1e-6)
        assert float(m.count) == float(one.count) == 120_001.0
    assert 0.15 < float(one.running_mean[0]) < 0.18 and 1.12 < float(one.running_var[0]) < 1.16


def test_a_gmi_without_rows_joins_the_step_and_adds_nothing() -> None:
    """The learner's trainer with no rows in a minibatch joins the collective; the step is the other's rows.

    On rl-games' per-channel statistics (image inputs), whose moments are over rows and pixels but whose count is
    rows: the group normaliser counted pixels until this test.
    """
    torch.manual_seed(1)
    start = RunningMeanStd((2, 3, 3), per_channel=True)  # rl-games' per-channel statistics of image inputs
    start.train()
    start(torch.randn(50, 2, 3, 3))
    rows = torch.randn(20, 2, 3, 3) + 2
    one = copy.deepcopy(start)
    one(rows)
    def gmi(i: int, all_reduce: Callable[[torch.Tensor], None]) -> GroupRunningMeanStd:
        m = GroupRunningMeanStd(copy.deepcopy(start), all_reduce)
        m.train()
        if i == 0:
            m(rows)
        else:
            step_without_rows(m)
        return m

    for m in run_gmis(2, gmi):
        torch.testing.assert_close(m.running_mean, one.running_mean, rtol=1e-5, atol=1e-6)
        assert float(m.count) == float(one.count) == 1 + 50 + 20  # rl-games counts rows, not rows x pixels


def test_dict_observations_normalised_over_the_group_equal_one_process_whatever_each_gmis_key_order() -> None:
    """rl-games' ``RunningMeanStdObs``: GMI 0 holds the minibatch's rows with its keys in another order than the
    space's, GMI 1 holds none of the second minibatch; both end where one process ends on the whole batch (a GMI
    refused dict observations by name before)."""
    torch.manual_seed(2)
    space = {"joints": (3,), "camera": (2, 3, 3)}
    rows = [{"camera": torch.randn(8, 2, 3, 3) + 1, "joints": torch.randn(8, 3) * 2},
            {"joints": torch.randn(6, 3) - 1, "camera": torch.randn(6, 2, 3, 3)}]
    one = RunningMeanStdObs(space)
    one.train()
    one({k: torch.cat([rows[0][k], rows[1][k]]) for k in space})
    one({k: torch.cat([rows[0][k], rows[1][k]]) for k in space})
    one({k: rows[0][k] for k in space})

    def gmi(i: int, all_reduce: Callable[[torch.Tensor], None]) -> nn.Module:
        model = nn.Module()
        model.running_mean_std = RunningMeanStdObs(space)
        assert group_normalisers(model, all_reduce) == ["running_mean_std"]
        m = model.running_mean_std
        m.train()
        m(rows[i])
        out = m(dict(reversed(rows[i].items())))  # the same rows, the keys in the other order
        assert list(out) == list(reversed(rows[i]))
        if i == 0:
            m(rows[0])
        else:
            step_without_rows(m)
        return m

    for m in run_gmis(2, gmi):
        for k in space:
            torch.testing.assert_close(m.running_mean_std[k].running_mean, one.running_mean_std[k].running_mean,
                                       rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(m.running_mean_std[k].running_var, one.running_mean_std[k].running_var,
                                       rtol=1e-5, atol=1e-6)
            assert float(m.running_mean_std[k].count) == float(one.running_mean_std[k].count) == 1 + 14 + 14 + 8
        assert m.state_dict().keys() == one.state_dict().keys()  # rl-games' checkpoints load either way


def test_dict_observations_missing_a_key_are_refused_before_any_collective() -> None:
    """A GMI that skipped a key would skip that key's collective and hang the group: refused, naming both sets."""
    calls: list[torch.Tensor] = []
    model = nn.Module()
    model.running_mean_std = RunningMeanStdObs({"joints": (3,), "camera": (2, 3, 3)})
    group_normalisers(model, calls.append)
    model.running_mean_std.train()
    with pytest.raises(ValueError, match=r"invalid observation keys \['joints'\]; .*\['camera', 'joints'\]"):
        model.running_mean_std({"joints": torch.zeros(4, 3)})
    assert calls == []


def test_reduce_gradients_averages_flat() -> None:
    class Half:
        comm_s = 0.0

        def allreduce_(self, flat: torch.Tensor, average: bool = True) -> torch.Tensor:
            return flat.mul_(0.5)

    lin = nn.Linear(3, 2)
    lin.weight.grad = torch.ones(2, 3) * 4
    lin.bias.grad = torch.arange(2.0)
    reduce_gradients(lin.parameters(), Half())  # type: ignore[arg-type]
    assert torch.equal(lin.weight.grad, torch.full((2, 3), 2.0))
    assert torch.equal(lin.bias.grad, torch.tensor([0.0, 0.5]))


def test_fit_minibatch() -> None:
    assert fit_minibatch(1024, 256) == 256
    assert fit_minibatch(48 * 16, 500) == 384
    assert fit_minibatch(100, 1000) == 100


#: epochs of the shared run: two show both an epoch's axis (TensorBoard) and the counts added at each merge
EPOCHS = 2


@pytest.fixture(scope="module")
def two_gmis(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tcg_ex GMIs, EPOCHS epochs: one launch read by the normaliser counts, the TensorBoard axis and the info
    key below."""
    run_dir = tmp_path_factory.mktemp("two_gmis") / "run"
    r = run_cli(*FAST, "gmis_per_gpu=2", f"max_iterations={EPOCHS}", f"hydra.run.dir={run_dir}",
                "train.info_key=time_outs")
    left = gmiexp_workers(run_dir)
    for p in left:
        p.kill()
    assert not left, f"orphan GMI workers left behind: {[p.pid for p in left]}"
    assert r.returncode == 0, r.stderr[-3000:]
    return run_dir


def test_first_merge_counts_the_initial_count_once_plus_every_gmis_samples(two_gmis: Path) -> None:
    # two tcg_ex GMIs, EPOCHS epochs. Each feeds its input normaliser horizon x num_envs observations per
    # mini-epoch (rl-games' discrete agent re-enters train mode every minibatch) and its value
    # normaliser the epoch's values and returns once each; the initial count is counted once, not once per GMI.
    (path,) = (two_gmis / "rl_games" / "run" / "nn").glob("last_*.pth")
    state = torch.load(path, weights_only=False)["model"]
    rows, mini_epochs, gmis = 16 * 32, 2, 2  # FAST: train.horizon_length x num_envs, train.mini_epochs
    initial = 1.0  # rl-games' RunningMeanStd starts from one prior sample, the same on every GMI
    assert float(state["running_mean_std.count"]) == initial + EPOCHS * gmis * mini_epochs * rows
    assert float(state["value_mean_std.count"]) == initial + EPOCHS * gmis * 2 * rows


def test_tensorboard_steps_are_the_frames_before_each_epoch_as_rl_games_writes_them(two_gmis: Path) -> None:
    """rl-games writes an epoch's figures at the frames trained before it (0 for the first epoch); 2 GMIs count
    both GMIs' frames. The axis was read after the epoch's frames were added, one epoch late.

    (Moved here from test_agent_writer.py to share the run above; 2 epochs show the one-epoch lag as 3 did.)"""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = {p.parent for p in (two_gmis / "rl_games").rglob("events.out.tfevents.*")}
    acc = EventAccumulator(str(events))
    acc.Reload()
    per_epoch = 2 * 32 * 16  # 2 GMIs x num_envs x horizon_length
    for tag in ("losses/a_loss", "info/kl", "performance/step_fps"):
        assert [e.step for e in acc.Scalars(tag)] == [i * per_epoch for i in range(EPOCHS)], tag


def test_each_epoch_records_the_info_key_averaged_over_the_gmis_on_every_gmi(two_gmis: Path) -> None:
    """``train.info_key``: the same run-wide figure in each GMI's history (tests/rl/rlgames/test_observer.py has
    the mean of unequal values)."""
    rows = [[json.loads(line) for line in (two_gmis / "gmis" / str(g) / "history.jsonl").read_text().splitlines()]
            for g in (0, 1)]
    assert [len(r) for r in rows] == [EPOCHS, EPOCHS]
    for a, b in zip(*rows, strict=True):
        assert a["info/time_outs"] == b["info/time_outs"] and 0.0 <= a["info/time_outs"] <= 1.0


def test_the_scheduler_reads_the_kl_averaged_over_every_gmi() -> None:
    """rl-games all-reduces the KL before its adaptive scheduler reads it; gmiexp's wrapper, through the manager."""
    from rl_games.common.schedulers import AdaptiveScheduler

    from gmiexp.rl.rlgames.sync import SyncedScheduler

    class TwoGMIs:  # the other GMI saw KL 0.0: the mean halves this GMI's
        def mean_float(self, value: float) -> float:
            return (value + 0.0) / 2

    inner = AdaptiveScheduler(kl_threshold=0.008)
    synced = SyncedScheduler(inner, TwoGMIs())  # type: ignore[arg-type]
    # 0.02 alone is above 2 x threshold (the rate would drop); the mean 0.01 is within [threshold/2, 2 x threshold]
    assert inner.update(1e-3, 0.0, 1, 0, 0.02)[0] < 1e-3
    assert synced.update(1e-3, 0.0, 1, 0, 0.02)[0] == 1e-3
    synced.kl_threshold = 0.1
    assert inner.kl_threshold == 0.1


def test_advantages_normalised_over_the_group_equal_one_gmi_on_the_whole_batch() -> None:
    from gmiexp.rl.rlgames.sync import normalise_over_group

    a = torch.randn(48, generator=torch.Generator().manual_seed(3), dtype=torch.float32) * 3 + 1
    whole = (a - a.mean()) / (a.std() + 1e-8)  # rl-games' normalisation of one GMI's batch
    parts = a.chunk(3)
    sums = [None] * 3

    def group(t: torch.Tensor) -> None:  # the sum of every part's moments, as gloo would give each GMI
        t.copy_(sum(torch.tensor([p.numel(), p.double().sum(), (p.double() ** 2).sum()]) for p in parts))

    for i, p in enumerate(parts):
        sums[i] = normalise_over_group(p, group)
    assert torch.allclose(torch.cat(sums), whole, atol=1e-5)
    assert not torch.allclose(torch.cat([(p - p.mean()) / (p.std() + 1e-8) for p in parts]), whole, atol=1e-3)
