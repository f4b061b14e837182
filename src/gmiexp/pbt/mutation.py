"""Population-based training's mutations: the anchors' functions, drawn from a seeded generator, in one registry.

The functions are rl-games master's (``rl_games/common/pbt/mutation.py``, from Isaac Lab's ``isaaclab_rl``) and
DexPBT's (IsaacGymEnvs ``isaacgymenvs/pbt/mutation.py``), with the same draws in the same order: ``mutate`` tosses
one coin per key (``rng.random() > rate`` keeps the value), ``mutate_float`` draws ``k ~ U(change_range)`` and then
whether to divide (``rng.random() < 0.5``) or multiply. The anchors draw from the global ``random`` module; here the
caller passes a ``random.Random``, so a population's mutations repeat from its seed (and a generator seeded like the
global one draws the anchors' very values, which the tests check).

A variant registers itself with :func:`mutation` and says what it acts on (an integer key needs an integer mutation;
``mutate_discount`` needs a value in [0, 1]), so the config's checks ask the variant rather than its name. Pure:
no torch, no processes; it imports only gmiexp's registry.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gmiexp.registry import Registry

#: (value, change_range, generator) -> the mutated value
MutateFn = Callable[[float, tuple[float, float], random.Random], float]

#: bounds a mutated value is clipped to: (lo, hi), either None for none
Bounds = tuple[float | None, float | None]


@dataclass(frozen=True)
class Mutation:
    """A registered mutation function and the values it is meant for (what the config's checks ask)."""

    name: str
    fn: MutateFn
    integer: bool = False  # acts on integer keys (and only on them)
    domain: Bounds = (None, None)  # the values it may be given, e.g. (0, 1) for a discount

    def __call__(self, value: float, change_range: tuple[float, float], rng: random.Random) -> float:
        return self.fn(value, change_range, rng)


MUTATIONS: Registry[Mutation] = Registry("pbt mutation")


def mutation(name: str, *, integer: bool = False, domain: Bounds = (None, None)) -> Callable[[MutateFn], MutateFn]:
    """Decorator: register ``fn`` as the mutation ``name`` (what ``pbt.mutation`` values name)."""

    def deco(fn: MutateFn) -> MutateFn:
        MUTATIONS.register(name)(Mutation(name, fn, integer, domain))
        return fn

    return deco


@mutation("mutate_float")
def mutate_float(value: float, change_range: tuple[float, float], rng: random.Random) -> float:
    """``value`` divided or multiplied, with even odds, by ``k ~ U(change_range)`` (both anchors)."""
    k = rng.uniform(*change_range)
    return value / k if rng.random() < 0.5 else value * k


@mutation("mutate_float_min_1")
def mutate_float_min_1(value: float, change_range: tuple[float, float], rng: random.Random) -> float:
    """``mutate_float`` floored at 1 (DexPBT's, for factors that must not shrink below one)."""
    return max(1.0, mutate_float(value, change_range, rng))


@mutation("mutate_eps_clip")
def mutate_eps_clip(value: float, change_range: tuple[float, float], rng: random.Random) -> float:
    """``mutate_float`` clamped to the PPO clip range [0.01, 0.3] (DexPBT's)."""
    return min(0.3, max(0.01, mutate_float(value, change_range, rng)))


@mutation("mutate_mini_epochs", integer=True)
def mutate_mini_epochs(value: float, change_range: tuple[float, float], rng: random.Random) -> float:
    """One more or one fewer pass, with even odds, clamped to [1, 8] (DexPBT's; ``change_range`` unused)."""
    stepped = value + 1 if rng.random() < 0.5 else value - 1
    return int(min(8, max(1, stepped)))


@mutation("mutate_discount", domain=(0.0, 1.0))
def mutate_discount(value: float, change_range: tuple[float, float], rng: random.Random) -> float:
    """``1 - value`` mutated by U(1.1, 1.2) whatever ``change_range`` says: a discount near 1 moves only a little.

    Both anchors ignore the configured range here: a large change of gamma changes every value estimate.
    """
    return 1.0 - mutate_float(1.0 - value, (1.1, 1.2), rng)


def clip(value: float, bounds: Bounds) -> float:
    """``value`` within ``bounds`` (a key's declared range), keeping an integer an integer."""
    lo, hi = bounds
    if lo is not None and value < lo:
        value = type(value)(lo)
    if hi is not None and value > hi:
        value = type(value)(hi)
    return value


def mutate(values: Mapping[str, float], spec: Mapping[str, str], rate: float, change_range: tuple[float, float],
           rng: random.Random, bounds: Mapping[str, Bounds] | None = None) -> dict[str, float]:
    """``values`` with each key of ``spec`` mutated with probability ``rate`` by the function ``spec`` names.

    The anchors' ``mutate``: keys in order, one coin per key that has a function (none for the others), the
    function's draws after its coin. A mutated value is then clipped to ``bounds[key]`` (its declared range), which
    the anchors leave to the functions (DexPBT's ``mutate_discount`` of a gamma below 1/6 goes negative).
    """
    bounds = bounds or {}
    out: dict[str, float] = {}
    for key, value in values.items():
        name = spec.get(key)
        if name is None or rng.random() > rate:
            out[key] = value
            continue
        out[key] = clip(MUTATIONS.get(name)(value, change_range, rng), bounds.get(key, (None, None)))
    return out


def log_uniform(lo: float, hi: float, rng: random.Random) -> float:
    """A draw whose logarithm is uniform over [log lo, log hi] (a learning rate's usual prior; 0 < lo <= hi)."""
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def initial_values(base: Mapping[str, float], init: Mapping[str, tuple[float, float]], members: int,
                   seed: int) -> list[dict[str, float]]:
    """Each member's starting values: ``base`` with every key of ``init`` drawn log-uniformly from its range.

    Member ``m`` draws from its own generator (``seed`` and ``m``), so a member's start does not depend on how many
    members there are.
    """
    out = []
    for m in range(members):
        rng = random.Random(f"{seed}:{m}:init")
        out.append({**base, **{k: log_uniform(lo, hi, rng) for k, (lo, hi) in init.items()}})
    return out
