"""The rules on objective tables equal the anchors' formulas, written out here from their sources.

Band rule: rl-games master ``rl_games/common/pbt/pbt.py`` (``after_steps``; Isaac Lab ``isaaclab_rl/rl_games/pbt``):
``upper = max(mean + threshold_std * std, mean + threshold_abs)``, ``lower = min(mean - threshold_std * std,
mean - threshold_abs)`` over the known objectives (``np.std``: the population deviation); an underperformer takes
``random.choice(leaders)`` or itself. DexPBT: IsaacGymEnvs ``isaacgymenvs/pbt/pbt.py`` (``after_steps``).
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from gmiexp.errors import ConfigError
from gmiexp.pbt.rules import (
    REPLACE_RULES,
    UNINITIALIZED,
    Record,
    Rules,
    cuts,
    decide,
    in_grace,
    leaders_and_underperformers,
    start_values,
    table_at,
)


def table(objectives: list[float | None], best: dict[int, float] | None = None, frames: int = 0) -> dict:
    best = best or {}
    return {m: None if o is None else Record(m, 1, frames, o, best.get(m)) for m, o in enumerate(objectives)}


def band_by_hand(objectives: list[float | None], k_std: float, k_abs: float) -> tuple[list[int], list[int]]:
    """rl-games master's after_steps, step 1 ("Stats"), on the members whose objective is known."""
    init = [(o, p) for p, o in enumerate(objectives) if o is not None]
    values = np.array([o for o, _ in init])
    mean, std = float(np.mean(values)), float(np.std(values))
    upper = max(mean + k_std * std, mean + k_abs)
    lower = min(mean - k_std * std, mean - k_abs)
    return [p for o, p in init if o > upper], [p for o, p in init if o < lower]


BAND_TABLES = [
    [1.0, 2.0, 3.0, 10.0, None, 2.5],  # one clear leader, an unreported member
    [1.00, 1.02, 1.04, 0.98],  # spread below threshold_abs: nobody leads or lags
    [-300.0, -120.0, -80.0, 40.0, 55.0, 60.0, -500.0, 10.0],  # Ant-like returns, negative ones too
    [0.2, 0.2, 0.2, 0.9],
]


@pytest.mark.parametrize("objectives", BAND_TABLES)
@pytest.mark.parametrize(("k_std", "k_abs"), [(0.10, 0.05), (1.0, 0.0), (0.0, 5.0)])
def test_band_rule_leaders_and_underperformers_equal_rl_games_formula(objectives, k_std, k_abs) -> None:
    rules = Rules(population=len(objectives), threshold_std=k_std, threshold_abs=k_abs)
    assert leaders_and_underperformers(table(objectives), rules) == band_by_hand(objectives, k_std, k_abs)


def test_band_cuts_by_hand() -> None:
    # mean 2.5, population std sqrt(1.25) = 1.1180; upper max(2.5 + 0.1118, 2.55) = 2.6118, lower 2.3882
    c = cuts([1.0, 2.0, 3.0, 4.0], 0.10, 0.05)
    assert (c.mean, c.std) == pytest.approx((2.5, math.sqrt(1.25)))
    assert (c.upper, c.lower) == pytest.approx((2.5 + 0.1 * math.sqrt(1.25), 2.5 - 0.1 * math.sqrt(1.25)))


def test_an_underperformer_copies_the_leader_random_choice_draws() -> None:
    # mean 5.083, std 3.481: upper max(5.431, 5.133) = 5.431 (5.5 leads too), lower min(4.735, 5.033) = 4.735
    objectives = [5.0, 9.0, 1.0, 9.5, 5.5, 0.5]
    leaders, under = band_by_hand(objectives, 0.10, 0.05)
    assert leaders == [1, 3, 4] and under == [2, 5]
    rules, chosen = Rules(population=6), set()
    for seed in range(40):
        d = decide("default", table(objectives), 2, rules, random.Random(seed))
        assert d.source == random.Random(seed).choice(leaders) and d.copies  # rl-games: random.choice(leaders)
        chosen.add(d.source)
    assert chosen == {1, 3, 4}
    assert decide("default", table(objectives), 0, rules, random.Random(0)).source is None  # not an underperformer


def test_an_underperformer_without_leaders_mutates_its_own_values() -> None:
    # mean 7.75, std 2.165; with threshold_abs 2: upper max(7.97, 9.75) = 9.75 above the 9s, lower 5.75 above 4
    objectives = [9.0, 9.0, 9.0, 4.0]
    assert band_by_hand(objectives, 0.10, 2.0) == ([], [3])
    d = decide("default", table(objectives), 3, Rules(population=4, threshold_abs=2.0), random.Random(0))
    assert d.source == 3 and d.mutates and not d.copies


def dexpbt_by_hand(objectives: list[float | None], idx: int, best_in_iteration: float | None, n: int,
                   rnd: random.Random) -> int | None:
    """DexPBT's after_steps from "policies = list(range(...))" to the choice of replacement_policy."""
    target = [_UNINIT if o is None else o for o in objectives]
    policies_sorted = sorted(zip(target, range(n), strict=True), reverse=True)
    objs = [o for o, _ in policies_sorted]
    policies_sorted = [p for _, p in policies_sorted]
    filtered = [o for o in objs if o > _UNINIT]
    replace_worst, replace_best = math.ceil(0.125 * n), math.ceil(0.3 * n)
    best_policies, worst_policies = policies_sorted[:replace_best], policies_sorted[-replace_worst:]
    if idx not in worst_policies:
        return None
    if best_in_iteration is not None and best_in_iteration >= min(objs[:replace_best]):
        return None
    if len(filtered) <= max(2, n // 2):
        return None
    candidate = rnd.choice(best_policies)
    delta = target[candidate] - target[idx]
    num_outliers = int(math.floor(0.2 * len(filtered)))
    std = np.std(sorted(filtered)[num_outliers:]) if len(filtered) > num_outliers else np.std(filtered)
    if delta > 0.5 * std and delta > 0.05 * abs(target[candidate]):
        return candidate
    return idx


_UNINIT = -1e9


def test_dexpbt_copies_one_of_the_best_when_the_lead_is_clear() -> None:
    # 8 members: worst ceil(0.125 * 8) = 1 (member 7), best ceil(0.3 * 8) = 3 (members 0-2); the std without the
    # lowest floor(0.2 * 8) = 1 objective is np.std([4..10]) = 2: a lead of 9 > 0.5 * 2 and > 0.05 * 10
    objectives = [10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 1.0]
    rules = Rules(population=8)
    for seed in range(20):
        d = decide("dexpbt", table(objectives), 7, rules, random.Random(seed))
        assert d.source == random.Random(seed).choice([0, 1, 2]) and d.copies
    assert decide("dexpbt", table(objectives), 6, rules, random.Random(0)).source is None  # not among the worst


def test_dexpbt_mutates_itself_when_the_lead_is_within_5_percent() -> None:
    objectives = [10.0, 9.95, 9.9, 9.85, 9.8, 9.75, 9.7, 9.65]  # lead <= 0.35 < 0.05 * 9.9
    d = decide("dexpbt", table(objectives), 7, Rules(population=8), random.Random(3))
    assert d.source == 7 and not d.copies


def test_dexpbt_keeps_a_member_whose_best_this_interval_reaches_the_top() -> None:
    objectives = [10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 1.0]
    assert decide("dexpbt", table(objectives, best={7: 8.0}), 7, Rules(population=8), random.Random(0)).source is None
    assert decide("dexpbt", table(objectives, best={7: 7.9}), 7, Rules(population=8), random.Random(0)).copies


def test_dexpbt_waits_for_more_than_half_the_members() -> None:
    objectives = [10.0, 9.0, 8.0, 1.0, None, None, None, None]  # 4 reported <= max(2, 8 // 2)
    assert decide("dexpbt", table(objectives), 3, Rules(population=8), random.Random(0)).source is None


def test_dexpbt_equals_its_source_on_random_tables() -> None:
    gen = np.random.default_rng(0)
    copied = kept = mutated = 0
    for case in range(600):
        n = int(gen.integers(3, 13))
        # a third of the tables cluster within a few percent of 100 (DexPBT's 5% test: mutate own values)
        centre, spread = (100.0, 1.0) if case % 3 == 0 else (0.0, 50.0 * float(gen.choice([0.01, 1, 10])))
        objectives = [None if gen.random() < 0.15 else centre + float(gen.normal(0, spread)) for _ in range(n)]
        reported = [m for m, o in enumerate(objectives) if o is not None]
        if not reported:
            continue
        # half the cases ask the lowest member (the one DexPBT may replace), half any reported one
        idx = min(reported, key=lambda m: objectives[m]) if gen.random() < 0.5 else int(gen.choice(reported))
        best = None if gen.random() < 0.5 else objectives[idx] + float(gen.exponential(20))
        expected = dexpbt_by_hand(objectives, idx, best, n, random.Random(case))
        got = decide("dexpbt", table(objectives, best={idx: best} if best is not None else None), idx,
                     Rules(population=n), random.Random(case))
        assert got.source == expected, (objectives, idx, best, got.reason)
        copied += got.copies
        mutated += got.source == idx
        kept += got.source is None
    assert copied > 20 and mutated > 20 and kept > 20  # every branch taken


def test_comparisons_use_each_members_latest_record_at_equal_or_fewer_frames() -> None:
    history = [Record(0, 1, 100, 5.0), Record(1, 1, 100, 1.0), Record(1, 2, 200, 2.0), Record(1, 3, 300, 50.0),
               Record(0, 2, 200, 6.0)]
    t = table_at(history, 3, 2)
    assert t[0].objective == 6.0 and t[1].objective == 2.0 and t[2] is None  # member 1's interval-3 record: later
    assert table_at(history, 3, 3)[1].objective == 50.0


def test_grace_periods_hold_replacements_back() -> None:
    rules = Rules(population=6, start_after=1000, initial_delay=5000)
    assert in_grace(4999, 0, rules) and not in_grace(5000, 0, rules)  # initial_delay since the run's start
    assert in_grace(6500, 6000, rules) and not in_grace(7000, 6000, rules)  # start_after since the last exploit
    objectives = [5.0, 9.0, 1.0, 9.5, 5.5, 0.5]
    d = decide("default", table(objectives, frames=5500), 2, rules, random.Random(0), started_at=5000)
    assert d.source is None and "grace" in d.reason
    assert decide("default", table(objectives, frames=6000), 2, rules, random.Random(0), started_at=5000).copies


def test_an_unknown_objective_waits() -> None:
    t = table([5.0, 9.0, None])
    assert decide("default", t, 2, Rules(population=3), random.Random(0)).source is None
    assert UNINITIALIZED == _UNINIT


def test_dexpbt_mutates_the_leaders_values_with_leader_params_prob() -> None:
    own, leader = {"lr": 1.0}, {"lr": 2.0}
    rules = Rules(population=8, leader_params_prob=0.5)
    for seed in range(30):
        expected = leader if random.Random(seed).random() < 0.5 else own  # DexPBT: random.random() < 0.5
        assert start_values("dexpbt", own, leader, rules, random.Random(seed)) == expected
    assert start_values("default", own, leader, rules, random.Random(0)) == leader  # rl-games: the source's


def test_rules_are_a_registry_naming_the_valid_ones() -> None:
    assert REPLACE_RULES.names() == ("default", "dexpbt")
    with pytest.raises(ConfigError, match="invalid pbt replace_rule: 'nope'; valid: default, dexpbt"):
        REPLACE_RULES.get("nope")


def test_members_seed_apart_so_no_two_share_an_environment_or_a_gmi_stream() -> None:
    """Not seed + member: member 1 would step member 0's environments 1..E-1 again (env i takes its seed + i)."""
    from gmiexp.pbt.rules import member_seed

    seeds = [member_seed(7, m) for m in range(16)]
    assert seeds[0] == 7 and seeds == [member_seed(7, m) for m in range(16)]  # member 0 is the run; repeatable
    envs = 4096 * 8  # 8 segments of 4,096 environments each
    spans = sorted((s, s + envs) for s in seeds)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
