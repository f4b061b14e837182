"""Mutations draw the anchors' values from the same seed, stay in their ranges, and mutate at their rate."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from gmiexp.pbt.mutation import MUTATIONS, Mutation, initial_values, mutate, mutation


def rl_games_mutate(params: dict, mutations: dict, rate: float, change_range: tuple[float, float]) -> dict:
    """rl-games master rl_games/common/pbt/mutation.py (mutate, mutate_float, mutate_discount) and DexPBT's
    isaacgymenvs/pbt/mutation.py (mutate_float_min_1, mutate_eps_clip, mutate_mini_epochs), on the global random."""

    def mutate_float(x, change_min=1.1, change_max=1.5):
        k = random.uniform(change_min, change_max)
        return x / k if random.random() < 0.5 else x * k

    funcs = {
        "mutate_float": mutate_float,
        "mutate_discount": lambda x, **kw: 1.0 - mutate_float(1.0 - x, change_min=1.1, change_max=1.2),
        "mutate_float_min_1": lambda x, **kw: max(1.0, mutate_float(x, **kw)),
        "mutate_eps_clip": lambda x, **kw: min(0.3, max(0.01, mutate_float(x, **kw))),
        "mutate_mini_epochs": lambda x, **kw: int(min(8, max(1, x + 1 if random.random() < 0.5 else x - 1))),
    }
    cmin, cmax = change_range
    out = {}
    for name, val in params.items():
        fn_name = mutations.get(name)
        if fn_name is None or random.random() > rate:
            out[name] = val
            continue
        out[name] = funcs[fn_name](val, change_min=cmin, change_max=cmax)
    return out


VALUES = {"train.learning_rate": 3e-4, "train.gamma": 0.99, "train.grad_norm": 1.0, "train.e_clip": 0.2,
          "train.mini_epochs": 4, "train.tau": 0.95, "train.horizon_length": 16, "train.critic_coef": 2.0}
SPEC = {"train.learning_rate": "mutate_float", "train.gamma": "mutate_discount", "train.grad_norm":
        "mutate_float_min_1", "train.e_clip": "mutate_eps_clip", "train.mini_epochs": "mutate_mini_epochs",
        "train.tau": "mutate_discount", "train.critic_coef": "mutate_float"}  # horizon_length: no function


@pytest.mark.parametrize(("rate", "change_range"), [(0.25, (1.1, 2.0)), (0.9, (1.1, 1.5)), (0.15, (1.5, 1.5))])
def test_mutate_draws_the_anchors_values_from_the_same_seed(rate, change_range) -> None:
    state = random.getstate()
    try:
        for seed in range(300):
            random.seed(seed)
            expected = rl_games_mutate(VALUES, SPEC, rate, change_range)
            assert mutate(VALUES, SPEC, rate, change_range, random.Random(seed)) == expected
    finally:
        random.setstate(state)


def test_mutations_happen_at_their_rate_by_factors_in_range() -> None:
    rng, rate, lo, hi = random.Random(1), 0.25, 1.1, 2.0
    spec = {f"k{i}": "mutate_float" for i in range(8)}
    values = dict.fromkeys(spec, 1.0)
    changed, up, factors = 0, 0, []
    n = 5000
    for _ in range(n):
        out = mutate(values, spec, rate, (lo, hi), rng)
        for v in out.values():
            if v != 1.0:
                changed += 1
                up += v > 1.0
                factors.append(max(v, 1 / v))
    coins = n * len(spec)  # 40,000: the rate's standard error is 0.0022; a rate of 0.2 or 0.3 is 20 of them away
    assert abs(changed / coins - rate) < 0.01
    assert abs(up / changed - 0.5) < 0.02  # multiplied or divided with even odds (sd 0.005)
    assert min(factors) >= lo and max(factors) <= hi
    assert abs(statistics.fmean(factors) - (lo + hi) / 2) < 0.01  # k ~ U(1.1, 2.0): mean 1.55, sd of mean 0.0013


def test_discount_moves_one_minus_gamma_by_1_1_to_1_2_whatever_the_range() -> None:
    rng, ratios = random.Random(2), []
    for _ in range(2000):
        g = mutate({"g": 0.99}, {"g": "mutate_discount"}, 1.0, (1.1, 2.0), rng)["g"]
        ratios.append(max((1 - g) / 0.01, 0.01 / (1 - g)))
    assert 1.1 - 1e-9 <= min(ratios) and max(ratios) <= 1.2 + 1e-9
    assert max(ratios) > 1.19 and min(ratios) < 1.11  # the whole of [1.1, 1.2], not change_range's 2.0


def test_mutated_values_are_clipped_to_their_declared_range() -> None:
    rng, clipped, values = random.Random(3), 0, []
    for _ in range(500):  # 1 - 0.9 * k with k up to 1.2 goes below 0 (DexPBT's mutate_discount of a low gamma)
        v = mutate({"g": 0.1}, {"g": "mutate_discount"}, 1.0, (1.1, 2.0), rng, {"g": (0.0, 1.0)})["g"]
        values.append(v)
        clipped += v == 0.0
    assert min(values) >= 0.0 and max(values) <= 1.0
    assert clipped > 100  # 44% of draws fall below 0 (multiplied by k > 1/0.9) and are clipped


def test_integer_mutation_stays_an_integer_in_1_to_8() -> None:
    rng, seen = random.Random(4), set()
    x = 4
    for _ in range(300):
        x = mutate({"e": x}, {"e": "mutate_mini_epochs"}, 1.0, (1.1, 2.0), rng)["e"]
        assert isinstance(x, int) and 1 <= x <= 8
        seen.add(x)
    assert seen == set(range(1, 9))


def test_members_start_log_uniform_over_their_init_range_whatever_the_population() -> None:
    lo, hi = 1e-5, 1e-2
    starts = initial_values({"lr": 3e-4, "gamma": 0.99}, {"lr": (lo, hi)}, 2000, seed=7)
    logs = [math.log10(s["lr"]) for s in starts]
    assert all(lo <= s["lr"] <= hi and s["gamma"] == 0.99 for s in starts)
    assert abs(statistics.fmean(logs) - (-3.5)) < 0.05  # log-uniform: mean log10 -3.5, sd of mean 0.019
    assert abs(sum(x < -4.25 for x in logs) / len(logs) - 0.25) < 0.03  # a quarter below the first quartile
    assert initial_values({"lr": 3e-4}, {"lr": (lo, hi)}, 4, seed=7) == [{"lr": s["lr"]} for s in starts[:4]]


def test_a_variant_registers_itself_and_says_what_it_acts_on() -> None:
    assert {"mutate_float", "mutate_discount", "mutate_eps_clip", "mutate_float_min_1",
            "mutate_mini_epochs"} <= set(MUTATIONS.names())
    assert MUTATIONS.get("mutate_mini_epochs").integer and MUTATIONS.get("mutate_discount").domain == (0.0, 1.0)

    @mutation("test_double")
    def double(value: float, change_range: tuple[float, float], rng: random.Random) -> float:
        return 2 * value

    try:
        assert isinstance(MUTATIONS.get("test_double"), Mutation)
        assert mutate({"x": 1.0}, {"x": "test_double"}, 1.0, (1.1, 2.0), random.Random(0)) == {"x": 2.0}
    finally:
        MUTATIONS.unregister("test_double")
