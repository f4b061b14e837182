"""``launch.reshape=auto`` moves only when the move pays: the rule (:func:`gmiexp.launch.payback.weigh`) against
hand-worked figures, the costs it is fed (measured on the run, the prior before), and the explorer that asks it
before every trial and switch: a short run does not explore, a long one does."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from gmiexp.launch.elastic import Decision, Explorer, Reshaper, read_log
from gmiexp.launch.payback import SWITCH, TRIAL, Ledger, MoveCost, Remaining, weigh

# an epoch of 1,000 frames at 1,000 env steps/s: 1 s; one re-shape: 2 s and 10 episodes x 50 frames (0.5 s)
COST = MoveCost(seconds=2.0, episodes_cut=10, episode_frames=50)


def left(epochs: float) -> Remaining:
    return Remaining(epochs=epochs, epoch_frames=1000)


def test_a_switch_pays_once_the_epochs_left_win_its_cost_back() -> None:
    """+25%: each epoch takes 1 / 1.25 s, 0.2 s less; the move costs 2.5 s, won back in 12.5 epochs."""
    short, long = weigh(SWITCH, 1000.0, 0.25, left(12), COST), weigh(SWITCH, 1000.0, 0.25, left(13), COST)
    assert not short.pays and long.pays
    assert (long.cost_s, long.gain_s, long.payback_epochs) == pytest.approx((2.5, 13 * 0.2, 12.5))
    assert short.why().startswith("12 epochs left, 13 needed: +25.0% saves 2.4 s, 1 re-shape cost 2.5 s")
    assert short.record()["frames_cut"] == 500 and short.record()["reshape_s"] == 2.0


def test_a_trial_pays_only_when_its_own_epochs_plus_a_payback_are_left() -> None:
    """A trial: there and back (2 x 2.5 s), its window of 3 epochs and the warm-up one 20% slower (4 x 0.25 s):
    6 s, won back at +25% in 30 epochs, which start after the pair's 8 epochs: 38 needed."""
    args = dict(window=3, loss=0.2)
    v = weigh(TRIAL, 1000.0, 0.25, left(37), COST, **args)
    assert not v.pays and v.cost_s == pytest.approx(6.0) and v.need_epochs == pytest.approx(38.0)
    assert weigh(TRIAL, 1000.0, 0.25, left(39), COST, **args).pays


def test_no_gain_never_pays_and_a_free_move_pays_any_gain() -> None:
    free = MoveCost(seconds=0.0, episodes_cut=0, episode_frames=0)
    assert not weigh(SWITCH, 1000.0, 0.0, left(10**6), free).pays
    assert not weigh(SWITCH, 1000.0, -0.1, left(10**6), free).pays
    assert math.isinf(weigh(SWITCH, 1000.0, 0.0, left(10), COST).payback_epochs)
    assert weigh(SWITCH, 1000.0, 0.001, left(1), free).pays
    assert not weigh(TRIAL, 1000.0, 0.5, left(8), free, window=3).pays  # the pair itself takes the 8 epochs left


def test_the_cost_is_this_run_s_measured_reshapes_after_the_prior() -> None:
    """Before the first re-shape: launch.reshape_cost_s, and every environment's episode cut; then the mean of
    what this run measured. A cut episode is as long as the finished ones, at most what a segment stepped."""
    ledger = Ledger(prior_s=10.0, envs=128)
    c = ledger.cost(Remaining(epochs=100, epoch_frames=2048, episode_length=40.0, steps_per_env=64.0))
    assert (c.seconds, c.episodes_cut, c.episode_frames, c.measured) == (10.0, 128, 40.0, 0)
    assert ledger.cost(Remaining(epochs=1, epoch_frames=2048, steps_per_env=16.0)).episode_frames == 16.0
    ledger.seconds += [1.0, 2.0]
    ledger.cuts += [(120, None)]  # a trainer that counts the episodes only
    c = ledger.cost(Remaining(epochs=100, epoch_frames=2048, episode_length=900.0, steps_per_env=64.0))
    assert (c.seconds, c.episodes_cut, c.episode_frames, c.measured) == (1.5, 120, 64.0, 2)
    assert c.at(1000.0) == pytest.approx(1.5 + 120 * 64 / 1000)
    ledger.cuts += [(100, 2000)]  # and their frames: 20 a cut episode
    c = ledger.cost(Remaining(epochs=100, epoch_frames=2048, episode_length=900.0, steps_per_env=64.0))
    assert (c.episodes_cut, c.episode_frames) == (110, 20.0)
    carried = Ledger(prior_s=10.0, envs=128, cuts=[(0, 0)])  # the simulator's state went over: nothing cut
    assert carried.cost(Remaining(epochs=100, epoch_frames=2048, episode_length=40.0)).frames_cut == 0


def test_a_switch_to_a_winner_that_cannot_pay_back_is_not_made() -> None:
    """A-B-A: 2 beat 1 by 10%; with the run at its end the explorer stays on 1, and says why."""
    e = Explorer(reachable=[1, 2], incumbent=1, window=2, noise=0.05, drift=0.15, budget_epochs=10**6,
                 ledger=Ledger(prior_s=5.0, envs=16))
    near = Remaining(epochs=1000, epoch_frames=1000, episode_length=10)
    assert e.measured(1, 1000.0, 2, at=near)[0] == 2  # the trial pays over 1,000 epochs
    assert e.measured(2, 1100.0, 2, at=near)[0] == 1
    assert e.measured(1, 1000.0, 2, at=Remaining(epochs=20, epoch_frames=1000, episode_length=10)) is None
    assert (e.incumbent, e.phase) == (1, "settled")
    ((to, v),) = e.refused
    assert (to, v.move, v.pays) == (2, SWITCH, False) and v.gain == pytest.approx(0.1)


def test_a_trial_is_weighed_at_the_smallest_gain_that_counts_or_at_what_a_search_measured() -> None:
    """Not at the pair's noise: epochs that scatter by 15% would let a trial hope for +20% and a short run explore."""
    e = Explorer(reachable=[1, 2], incumbent=1, window=5, noise=0.05, drift=0.15, budget_epochs=10**6,
                 ledger=Ledger(prior_s=10.0, envs=16))
    e.samples[1] = [[100.0, 115.0, 85.0, 110.0, 90.0]]
    assert e.hoped(2) == 0.05
    e.prior = {1: 100.0, 2: 130.0}
    assert e.hoped(2) == pytest.approx(0.3)


def ant_rows(n: int) -> list[dict]:
    """A segment of Ant-sized epochs: 128 environments x 16 steps in 1.2 s, episodes of 50 steps."""
    return [{"iteration": i, "frames": 2048 * i, "wall_s": 1.2 * i, "episode/length": 50.0}
            for i in range(1, n + 1)]


def reshaper(tmp_path: Path, max_iterations: int, cost_s: float = 10.0) -> Reshaper:
    launch = SimpleNamespace(reshape_window=3, reshape_noise=0.05, reshape_drift=0.15, reshape_budget=1.0,
                             reshape_cost_s=cost_s)
    return Reshaper("auto", tmp_path, current=1, reachable=[1, 2], launch=launch, max_iterations=max_iterations,
                    envs=128)


@pytest.mark.parametrize("max_iterations, explores", [(100, False), (3000, True)])
def test_a_short_run_does_not_explore_while_a_long_one_does(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                           max_iterations: int, explores: bool) -> None:
    """The same window (1,707 env steps/s) and costs (10 s per re-shape before any was measured, 128 episodes of
    50 steps cut), weighed at the least gain a trial is kept at (5%): a trial needs 494 epochs (2 x 13.75 s, and
    0.24 s on a maybe slower partition, won back at 0.057 s an epoch after the pair's 8). Before, auto tried 2 GMIs
    in both."""
    r = reshaper(tmp_path, max_iterations)
    d = r.poll(ant_rows(4))
    err = capsys.readouterr().err
    if explores:
        assert isinstance(d, Decision) and d.to == 2 and d.weighed["pays"] and d.weighed["move"] == TRIAL
        assert read_log(tmp_path) == [] and "does not pay" not in err
        return
    assert d is None and r.explorer.phase == "settled"
    (rec,) = read_log(tmp_path)
    assert (rec["status"], rec["move"], rec["to"], rec["epochs_left"]) == ("refused", TRIAL, 2, 96)
    assert rec["need_epochs"] == pytest.approx(493.45, abs=0.1) and rec["frames_cut"] == 128 * 50
    assert rec["cost_s"] == pytest.approx(27.74, abs=0.01) and rec["reshape_s"] == 10.0
    assert err.count("auto: trial of gmis_per_gpu=2 does not pay: 96 epochs left, 494 needed") == 1


def test_a_refusal_is_said_once_and_each_window_logged(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    r = reshaper(tmp_path, 100)
    r.poll(ant_rows(4))
    r.explorer.phase, r.explorer.tried = "baseline", set()  # as after a drift: explore again
    r.poll(ant_rows(7))
    assert [rec["status"] for rec in read_log(tmp_path)] == ["refused", "refused"]
    assert capsys.readouterr().err.count("does not pay") == 1


def test_a_reshape_s_measured_seconds_and_cut_episodes_replace_the_prior(tmp_path: Path) -> None:
    """The launcher's times around a re-shape (the old partition's last epoch, the new one's first) and GMI 0's
    resume report become the cost of the next move, in reshapes.jsonl too."""
    r = reshaper(tmp_path, 3000)
    rows = ant_rows(4)
    d = r.poll(rows)
    r.done(d, stop_s=0.5, plan_s=0.1, started_at=0.0)
    r.segment_started(2, last_wall_s=rows[-1]["wall_s"])
    nxt = [{**row, "iteration": row["iteration"] + 4, "frames": row["frames"] + 4 * 2048,
            "wall_s": row["wall_s"] + 4.8 + 3.0} for row in ant_rows(2)]  # the first epoch ends 4.2 s late
    r.poll(nxt[:1])
    r.segment_ended({"gmis": {"0": {"resume": {"episodes_cut": 100, "frames_cut": 3000}}}})
    cost, cut = [rec for rec in read_log(tmp_path) if rec["status"] in ("cost", "cut")]
    assert (cost["from"], cost["to"], cost["epoch_s"]) == (1, 2, pytest.approx(1.2))
    assert (cost["seconds"], cost["cost_s"]) == (pytest.approx(4.2), pytest.approx(3.0))
    assert cut == {"status": "cut", "epoch": 4, "from": 1, "to": 2, "episodes_cut": 100, "frames_cut": 3000}
    c = r.explorer.ledger.cost(Remaining(epochs=10, epoch_frames=2048, episode_length=50.0))
    assert (c.seconds, c.episodes_cut, c.frames_cut, c.measured) == (pytest.approx(3.0), 100, 3000, 1)
    json.dumps(read_log(tmp_path))  # every record is plain JSON
