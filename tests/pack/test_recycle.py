"""Recycling freed cores: who takes a freed slot, on which cores, with how many GMIs."""

from __future__ import annotations

from gmiexp.pack.recycle import Grower, Growth, choose, shares


def member(num: int, cores: set[int], gmis: int = 1, reachable: tuple[int, ...] = (1, 2, 4), **kw) -> Grower:
    return Grower(num, frozenset(cores), gmis, reachable, **{"left_s": 100.0, "startup_core_s": 8.0, **kw})


def test_a_member_sharing_its_core_moves_to_the_idle_core_rather_than_spreading() -> None:
    """4 slots on 2 cores, round-robin: both long members (#1, #3) share core 1 after both short ones on core 0 end.

    The first long member moves to core 0 (one GMI, a whole core); the second keeps core 1, now its own, without a
    re-shape. Spreading both over both cores (the earlier rule) re-shaped both and ran 2 GMIs of half a core each.
    """
    longs = [member(1, {1}), member(3, {1})]
    assert choose((0,), longs) == Growth(1, (0,), 1, (1,))
    moved = [member(1, {0}), member(3, {1})]
    assert choose((0,), moved) is None  # the second freed slot (also core 0) is not idle any more
    assert shares({m.num: m.cores for m in moved}) == {1: 1.0, 3: 1.0}


def test_a_member_alone_on_its_cores_grows_onto_the_idle_ones_with_one_gmi_per_core() -> None:
    assert choose((0,), [member(1, {1})]) == Growth(1, (0, 1), 2, ())
    assert choose((2, 3), [member(1, {0, 1}, gmis=2)]) == Growth(1, (0, 1, 2, 3), 4, ())
    # a global batch 2 GMIs cannot share: the cores grow, the GMIs stay
    assert choose((0,), [member(1, {1}, reachable=(1, 3))]) == Growth(1, (0, 1), 1, ())


def test_cores_still_used_by_a_running_member_are_not_handed_out() -> None:
    """A short member ended on core 0 while another short one still runs there: nothing is idle yet."""
    assert choose((0,), [member(0, {0}), member(1, {1}), member(3, {1})]) is None


def test_the_smallest_share_goes_first_and_a_busy_member_is_passed_over() -> None:
    members = [member(1, {1}), member(2, {2}), member(3, {2})]
    assert choose((0,), members).num == 2  # half a core beats a whole one
    busy = [member(1, {1}), member(2, {2}, free=False), member(3, {2})]
    assert choose((0,), busy) == Growth(3, (0,), 1, (2,))  # the busy member's core still counts as shared


def test_a_move_that_would_not_enlarge_the_share_is_not_made() -> None:
    """Three shared cores (1.5 cores' worth) are not swapped for one idle core."""
    members = [member(1, {1, 2, 3}, gmis=2), member(2, {1, 2, 3}, gmis=2)]
    assert choose((0,), members) is None
    assert choose((0, 4), members) == Growth(1, (0, 4), 2, (1, 2, 3))


def test_a_member_near_its_end_or_not_yet_measured_keeps_its_cores() -> None:
    """Saved: time left x (1 - share before / share after); against PAYBACK (2) x its restart, its start-up's work
    (8 core-s here) at the new share."""
    assert choose((0,), [member(1, {1}, left_s=20.0)]) == Growth(1, (0, 1), 2, ())  # saves 10 s > 2 x 8 / 2
    assert choose((0,), [member(1, {1}, left_s=15.0)]) is None  # saves 7.5 s: a restart would not pay
    assert choose((0,), [member(1, {1}, left_s=15.0)], payback=0.5) is not None
    assert choose((0,), [member(1, {1}, left_s=None)]) is None  # restarting: no epoch since its last re-shape


def test_the_saving_counts_the_members_left_alone_while_the_mover_would_have_shared_with_them() -> None:
    """Two members share core 1; cores 0 and 3 fall idle: whoever takes them restarts with 2 GMIs (8 core-s of
    start-up on 2 cores: 4 s, x2 = 8 s to win back). #1 near its end (6 s left) saves 4.5 s itself and #3 3 s (the
    6 s it would have shared core 1): not enough. #3, with 200 s left, takes them."""
    near_end = [member(1, {1}, left_s=6.0), member(3, {1}, left_s=200.0)]
    assert choose((0, 3), near_end) == Growth(3, (0, 3), 2, (1,))
    both = [member(1, {1}, left_s=6.0), member(3, {1}, left_s=6.0)]
    assert choose((0, 3), both) is None  # 4.5 + 3 s < 8 s
    assert choose((0, 3), both, payback=0.5) == Growth(1, (0, 3), 2, (1,))


def test_a_move_keeping_the_gmis_and_the_core_count_is_live_and_costs_nothing() -> None:
    """One GMI trading its shared core for an idle one re-pins its threads: no restart to win back."""
    assert choose((0,), [member(1, {1}, left_s=1.0), member(3, {1}, left_s=1.0)]) == Growth(1, (0,), 1, (1,))
    assert choose((0,), [member(1, {1}, left_s=1.0)]) is None  # alone on its core: a grow restarts it


def test_on_a_gpu_a_member_grows_into_a_finished_member_s_mps_share() -> None:
    """GPU units are slots' MPS shares, never shared: the member holding the other share grows, GMIs one per share."""
    gpu = [member(1, {(0, 1)})]
    assert choose(((0, 0),), gpu) == Growth(1, ((0, 0), (0, 1)), 2, ())
    assert choose(((0, 0),), [member(1, {(0, 1)}, reachable=(1, 3))]) == Growth(1, ((0, 0), (0, 1)), 1, ())
    assert choose(((0, 0),), [member(1, {(0, 1)}), member(2, {(0, 0)})]) is None  # still held
