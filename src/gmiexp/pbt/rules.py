"""Population-based training's rules: who leads, who is replaced, by whom, and when, on a table of records.

Two rules, as the anchors write them:

* ``default``: Isaac Lab's and rl-games master's band rule (``rl_games/common/pbt/pbt.py``; Isaac Lab
  ``isaaclab_rl/rl_games/pbt/pbt.py``). Over the members whose objective is known, with mean ``mu`` and population
  standard deviation ``sigma``: leaders lie above ``max(mu + threshold_std * sigma, mu + threshold_abs)``,
  underperformers below ``min(mu - threshold_std * sigma, mu - threshold_abs)``. An underperformer copies a leader
  drawn at random (members in index order) and mutates the leader's values; with no leader it mutates its own.
* ``dexpbt``: DexPBT's (IsaacGymEnvs ``isaacgymenvs/pbt/pbt.py``). Members ranked by objective, highest first (ties:
  the higher index first; a member without a record ranks at -1e9, the anchors' "uninitialised"); only the bottom
  ``ceil(replace_fraction_worst * N)`` are considered, and not while the member's best objective within this
  interval reaches the lowest of the top ``ceil(replace_fraction_best * N)``, nor while no more than
  ``max(2, N // 2)`` members have reported. A leader drawn at random from the top is copied when its lead over the
  member exceeds ``replace_threshold_frac_std`` times the standard deviation of the objectives without their lowest
  ``floor(0.2 * n)``, and ``replace_threshold_frac_absolute`` times the leader's absolute objective; otherwise the
  member mutates its own values. The values it then mutates are the leader's with probability
  ``leader_params_prob`` (DexPBT: 0.5), else its own.

Both compare a member only with records at equal or fewer frames than its own: each member's latest record of the
same or an earlier interval (:func:`table_at`, the anchors' ``load_pbt_ckpts``). Grace periods (DexPBT's
``start_after`` since the member's last start or exploit, ``initial_delay`` since the run's start) hold any
replacement back (:func:`in_grace`). Random choices come from the generator the caller passes, seeded per member and
interval (:func:`member_rng`), so a population's decisions repeat from its seed.

Pure: no torch, no processes; it imports only gmiexp's registry.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from gmiexp.registry import Registry

#: the anchors' objective of a member that has not reported (``_UNINITIALIZED_VALUE``)
UNINITIALIZED = -1e9


@dataclass(frozen=True)
class Record:
    """One member's standing at the end of one interval (the anchors' ``<workspace>/<idx>/<iteration>.yaml``)."""

    member: int
    iteration: int  # frames // interval_steps when recorded
    frames: int
    objective: float | None  # None: not known yet (too few finished episodes)
    best: float | None = None  # the best objective seen within the interval (DexPBT)


@dataclass(frozen=True)
class Rules:
    """The rules' parameters (``pbt.*``): defaults are the anchors'."""

    population: int
    threshold_std: float = 0.10
    threshold_abs: float = 0.05
    replace_fraction_worst: float = 0.125
    replace_fraction_best: float = 0.3
    replace_threshold_frac_std: float = 0.5
    replace_threshold_frac_absolute: float = 0.05
    leader_params_prob: float = 0.5
    start_after: int = 0
    initial_delay: int = 0


@dataclass(frozen=True)
class Decision:
    """What a member does: ``source`` None keeps training; its own index mutates its values; another copies it."""

    member: int
    source: int | None
    reason: str

    @property
    def copies(self) -> bool:
        """The member takes another member's state (an exploit)."""
        return self.source is not None and self.source != self.member

    @property
    def mutates(self) -> bool:
        """The member's values change (with or without a copy)."""
        return self.source is not None


@dataclass(frozen=True)
class Cuts:
    """The band rule's statistics over the known objectives."""

    mean: float
    std: float
    upper: float
    lower: float


def iteration_of(frames: int, interval_steps: int) -> int:
    """The interval ``frames`` lies in (the anchors' ``frame // interval_steps``)."""
    return frames // interval_steps


def member_rng(seed: int, member: int, iteration: int) -> random.Random:
    """The generator of one member's decision at one interval (after rl-games' ``derive_seed``)."""
    return random.Random(f"{seed}:{member}:{iteration}")


def member_seed(seed: int, member: int) -> int:
    """Member ``member``'s run seed: the run's for member 0, a draw from (seed, member) below 2**30 for the others.

    Not ``seed + member``: a run seeds its GMIs ``seed + rank`` and its environments ``seed + i``
    (:mod:`gmiexp.planner.seeds`), so member 1 would have stepped member 0's environments 1..E-1 again (the same
    initial states, one place over) and its GMI 0 would have drawn member 0's GMI 1's stream.
    """
    return int(seed) if member == 0 else random.Random(f"{seed}:member:{member}").randrange(2**30)


def table_at(history: Iterable[Record], population: int, iteration: int) -> dict[int, Record | None]:
    """Each member's latest record of interval ``iteration`` or earlier (None: none yet).

    Comparisons at equal or fewer frames, as the anchors' ``load_pbt_ckpts`` reads the workspace.
    """
    table: dict[int, Record | None] = dict.fromkeys(range(population))
    for rec in history:
        if rec.iteration > iteration or not 0 <= rec.member < population:
            continue
        held = table[rec.member]
        if held is None or rec.iteration >= held.iteration:
            table[rec.member] = rec
    return table


def known(table: Mapping[int, Record | None]) -> dict[int, float]:
    """Member -> objective, for the members whose objective is known (index order)."""
    return {m: r.objective for m, r in sorted(table.items())
            if r is not None and r.objective is not None and r.objective > UNINITIALIZED}


def cuts(objectives: Iterable[float], threshold_std: float, threshold_abs: float) -> Cuts:
    """Mean, population standard deviation and the band's cuts (Isaac Lab / rl-games master)."""
    values = list(objectives)
    mu, sigma = statistics.fmean(values), statistics.pstdev(values)
    return Cuts(mu, sigma, max(mu + threshold_std * sigma, mu + threshold_abs),
                min(mu - threshold_std * sigma, mu - threshold_abs))


def leaders_and_underperformers(table: Mapping[int, Record | None], rules: Rules) -> tuple[list[int], list[int]]:
    """The band rule's leaders and underperformers, in index order (empty when no objective is known)."""
    objectives = known(table)
    if not objectives:
        return [], []
    c = cuts(objectives.values(), rules.threshold_std, rules.threshold_abs)
    return ([m for m, o in objectives.items() if o > c.upper], [m for m, o in objectives.items() if o < c.lower])


#: (table, member, rules, generator) -> the member's decision
DecideFn = Callable[[Mapping[int, "Record | None"], int, Rules, random.Random], Decision]


@dataclass(frozen=True)
class ReplaceRule:
    """A registered rule, and whether a mutating member mixes values (DexPBT: the leader's or its own)."""

    name: str
    decide: DecideFn
    mixes_values: bool = False


#: ``pbt.replace_rule`` names -> the rule (a variant registers itself with :func:`replace_rule`)
REPLACE_RULES: Registry[ReplaceRule] = Registry("pbt replace_rule")


def replace_rule(name: str, *, mixes_values: bool = False) -> Callable[[DecideFn], DecideFn]:
    """Decorator: register ``fn`` as the rule ``name`` (what ``pbt.replace_rule`` names)."""

    def deco(fn: DecideFn) -> DecideFn:
        REPLACE_RULES.register(name)(ReplaceRule(name, fn, mixes_values))
        return fn

    return deco


@replace_rule("default")
def band_rule(table: Mapping[int, Record | None], member: int, rules: Rules, rng: random.Random) -> Decision:
    """Isaac Lab's / rl-games master's rule: an underperformer copies a random leader, or mutates itself."""
    leaders, under = leaders_and_underperformers(table, rules)
    if member not in under:
        return Decision(member, None, "not an underperformer")
    if not leaders:
        return Decision(member, member, "underperformer, no leaders: mutate own values")
    return Decision(member, rng.choice(leaders), f"underperformer: copy a leader of {leaders}")


@replace_rule("dexpbt", mixes_values=True)
def dexpbt_rule(table: Mapping[int, Record | None], member: int, rules: Rules, rng: random.Random) -> Decision:
    """DexPBT's rule: the worst fraction copies one of the best fraction when the gap is clear, else mutates."""
    n = rules.population
    ranked = sorted(((_objective(table.get(p)), p) for p in range(n)), reverse=True)
    order = [p for _, p in ranked]
    worst = order[-math.ceil(rules.replace_fraction_worst * n):]
    n_best = math.ceil(rules.replace_fraction_best * n)
    reported = [o for o, _ in ranked if o > UNINITIALIZED]
    if member not in worst:
        return Decision(member, None, f"not among the worst {worst}")
    own = table.get(member)
    if own is not None and own.best is not None and own.best >= min(o for o, _ in ranked[:n_best]):
        return Decision(member, None, f"its best this interval {own.best:.6g} reaches the top {order[:n_best]}")
    if len(reported) <= max(2, n // 2):
        return Decision(member, None, f"only {len(reported)} of {n} members reported")
    best = [p for o, p in ranked[:n_best] if o > UNINITIALIZED]
    candidate = rng.choice(best)
    lead = _objective(table[candidate]) - _objective(own)
    trimmed = sorted(reported)[math.floor(0.2 * len(reported)):]
    by_std = rules.replace_threshold_frac_std * statistics.pstdev(trimmed)
    by_abs = rules.replace_threshold_frac_absolute * abs(_objective(table[candidate]))
    if lead > by_std and lead > by_abs:
        return Decision(member, candidate, f"copy {candidate}: lead {lead:.6g} > {by_std:.6g} and {by_abs:.6g}")
    return Decision(member, member, f"lead of {candidate} ({lead:.6g}) too small: mutate own values")


def _objective(rec: Record | None) -> float:
    return UNINITIALIZED if rec is None or rec.objective is None else rec.objective


def in_grace(frames: int, started_at: int, rules: Rules) -> bool:
    """Within DexPBT's grace periods: no replacement yet.

    ``start_after`` counts frames since the member's last start or exploit, ``initial_delay`` since the run's start.
    """
    return frames - started_at < rules.start_after or frames < rules.initial_delay


def decide(rule: str, table: Mapping[int, Record | None], member: int, rules: Rules, rng: random.Random,
           started_at: int = 0) -> Decision:
    """The member's decision under ``rule`` at its latest record (grace periods first; an unknown objective waits)."""
    own = table.get(member)
    if own is None or own.objective is None:
        return Decision(member, None, "objective not known yet")
    if in_grace(own.frames, started_at, rules):
        return Decision(member, None, f"in its grace period (frame {own.frames}, started at {started_at})")
    return REPLACE_RULES.get(rule).decide(table, member, rules, rng)


def start_values(rule: str, own: Mapping[str, float], source: Mapping[str, float], rules: Rules,
                 rng: random.Random) -> dict[str, float]:
    """The values a mutating member mutates.

    Its source's (the band rule: the leader's, or its own without one), or for a rule that mixes (DexPBT) the
    source's with probability ``leader_params_prob``, else its own (one draw, after the rule's).
    """
    if REPLACE_RULES.get(rule).mixes_values:
        return dict(source if rng.random() < rules.leader_params_prob else own)
    return dict(source)
