"""Algorithm 2 with paired comparisons (``search.variant=paired``): each decision measures its two points back to back.

On a shared host the speed drifts 20-40% over minutes and one profile's noise is 5-10%, the size of
the gains Algorithm 2 compares near a row's knee, so comparing profiles taken minutes apart decides
by the host's mood. Here every decision (does the next num_envs of a row beat the row's incumbent,
the paper's ``Sat >= alpha``; does a row's best beat the best so far) alternates profiles of its two
points (A B, A B A, A B A B, ...), estimates their log ratio from contrasts that cancel linear drift
(the one paired statistic, :func:`gmiexp.stats.paired_gain`), and profiles again only while the
difference is inside its noise, which is measured from the search's own re-measurements. Drift
cancels within a pair, so the profiles are shortened (``PairRule.length``), and the whole search is
held to a fraction of the grid's cost in profile-steps.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gmiexp.config import SearchConfig
from gmiexp.errors import ConfigError
from gmiexp.search.algorithm import METHODS, ProfileResult, SearchOutcome, Step
from gmiexp.stats import Gain, Sample, paired_gain, remeasured_sd

Point = tuple[int, int]  # (gmis_per_gpu, num_envs)
LengthProfiler = Callable[[int, int, float], ProfileResult]  # profile(G, N, length) -> result
Cost = Callable[[int, int, float], float]  # modelled cost of profile(G, N, length) in profile-steps


@dataclass(frozen=True)
class PairRule:
    """How sure a paired decision must be and what the search may spend.

    The values and their meaning live on ``SearchConfig`` (``search.pair_*``, ``search.budget``);
    :meth:`of` reads them, so a default is written once.
    """

    z: float  # decisive when the log ratio is more than z standard errors from the threshold
    tolerance: float  # also decided when z standard errors are below this (either choice loses little)
    max_profiles: int  # profiles a num_envs decision may hold, the incumbent's reused one included
    max_profiles_gmis: int  # ... and a decision between GMI counts (rarer, and it decides the pick)
    min_profiles: int  # profiles (A-B-A) before a num_envs step may end its row's climb
    min_profiles_gmis: int  # profiles (A-B-A-B) before a decision between GMI counts
    length: float  # profile length relative to a standard profile (env steps and iterations)
    plateau: float  # undecided: a row climbs unless this much slower; more GMIs only when this much faster
    budget: float  # the search's cost at most this fraction of the grid's, in profile-steps
    noise: float  # prior sd of the log difference of two profiles of one point one profile apart
    prior_weight: float = 1.0  # how many observed differences that prior counts as

    @classmethod
    def of(cls, search: SearchConfig | None = None, **changes: float) -> PairRule:
        """The rule ``search`` (default: the schema's defaults) sets, with ``changes`` applied."""
        s = search or SearchConfig()
        rule = cls(z=s.pair_z, tolerance=s.pair_tolerance, max_profiles=s.pair_max_profiles,
                   max_profiles_gmis=s.pair_max_profiles_gmis, min_profiles=s.pair_min_profiles,
                   min_profiles_gmis=s.pair_min_profiles_gmis, length=s.pair_length, plateau=s.pair_plateau,
                   budget=s.budget, noise=s.pair_noise)
        return dataclasses.replace(rule, **changes)


@dataclass(frozen=True)
class Measurement:
    """One runnable profile: its point, the search clock at its middle, system env steps/s, per-GMI memory."""

    point: Point
    t: float
    rate: float
    mem: float
    index: int  # position among all the search's profiles


@dataclass
class Comparison:
    """A paired decision, kept for search.json: the profiles it used, the paired ratio, what it decided and why."""

    kind: str  # num_envs (next point of a row vs the row's incumbent) | gmis (a row's best vs the best so far)
    incumbent: Point
    candidate: Point
    threshold: float = 0.0  # relative gain the larger num_envs has to show over the smaller (0 across rows)
    measurements: list[Measurement] = field(default_factory=list)
    ratio: float = math.nan  # paired estimate of candidate / incumbent
    noise: float = math.nan  # standard error of log(ratio)
    decision: str = ""  # candidate | incumbent | unrunnable (the candidate did not run)
    reason: str = ""  # decisive | within tolerance | futile | out of profiles | out of budget | unrunnable

    def as_dict(self) -> dict:
        return {"kind": self.kind, "incumbent": list(self.incumbent), "candidate": list(self.candidate),
                "threshold": self.threshold, "ratio": _finite(self.ratio), "noise": _finite(self.noise),
                "decision": self.decision, "reason": self.reason,
                "profiles": [{"gmis_per_gpu": m.point[0], "num_envs": m.point[1], "t": round(m.t, 2),
                              "env_steps_per_s": m.rate, "index": m.index} for m in self.measurements]}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


class Ledger:
    """The search's profiles in order: clock (summed profile wall time), spent cost and the budget."""

    def __init__(self, profile: LengthProfiler, cost: Cost, budget: float, length: float,
                 out: SearchOutcome) -> None:
        self.profile, self.cost, self.budget, self.length, self.out = profile, cost, budget, length, out
        self.clock = self.spent = 0.0
        self.measurements: list[Measurement] = []

    def fits(self, p: Point, reserve: float = 0.0, cap: float = math.inf) -> bool:
        """Whether profiling ``p`` leaves ``reserve`` of the budget free and keeps the spending under ``cap``."""
        after = self.spent + self.cost(*p, self.length)
        return after + reserve <= self.budget and after <= cap

    def price(self, *points: Point) -> float:
        return sum(self.cost(*p, self.length) for p in points)

    def measure(self, p: Point, decision: str) -> Measurement | None:
        r = self.profile(*p, self.length)
        self.spent += self.cost(*p, self.length)
        t = self.clock + r.wall_s / 2
        self.clock += r.wall_s
        share = self.cost(*p, self.length) / self.cost(*p, 1.0)
        self.out.record(Step(*p, r, decision if r.runnable else "unrunnable", length=self.length, cost_share=share))
        if not r.runnable:
            return None
        m = Measurement(p, t, r.top * p[0], r.mem_mb, len(self.out.steps) - 1)
        self.measurements.append(m)
        return m

    def recent(self, p: Point, within: int = 2) -> Measurement | None:
        """``p``'s measurement among the last ``within`` profiles (one a comparison can pair with), if any."""
        last = len(self.out.steps)
        return next((m for m in reversed(self.measurements) if m.point == p and m.index >= last - within), None)

    def difference_sd(self, prior: float, weight: float) -> float:
        """Pooled sd of log(rate) between two profiles of one point with one profile between them.

        Every A-B-A of the search gives one such difference (:func:`gmiexp.stats.remeasured_sd`); it
        holds both the profile's noise and the drift over two profiles, so it bounds what a pair's
        contrast can suffer. The prior stands in until the search has re-measured a few points.
        """
        by_index = {m.index: m for m in self.measurements}
        diffs = [math.log(m.rate / by_index[m.index - 2].rate) for m in self.measurements
                 if m.index - 2 in by_index and by_index[m.index - 2].point == m.point]
        return remeasured_sd(diffs, prior, weight)


def log_ratio(seq: Sequence[Measurement], incumbent: Point, difference_sd: float) -> Gain:
    """log(candidate / incumbent) from interleaved profiles, and its standard error (:func:`gmiexp.stats.paired_gain`).

    Each profile bracketed in time by two of the other point's is compared with their linear
    interpolation at its time, which cancels a linearly drifting host speed; without a bracketed
    profile (A then B) the drift over one profile's span stays in the estimate, and in the noise it
    is judged against. Each profile's noise is the search's re-measurement sd (:meth:`Ledger.difference_sd`).
    """
    return paired_gain([Sample.of_rate(m.point != incumbent, m.rate, difference_sd, m.t) for m in seq])


def compare(ledger: Ledger, rule: PairRule, kind: str, incumbent: Point, candidate: Point,
            threshold: Callable[[Sequence[Measurement]], float], reserve: float = 0.0,
            cap: float = math.inf) -> Comparison:
    """Profile ``candidate`` and ``incumbent`` alternately until the paired ratio decides between them.

    Starts from whatever of the two the last two profiles measured (a row's climb reuses its
    incumbent's profile), measures the point not measured last, and stops when the log ratio is
    ``rule.z`` standard errors from ``log(1 + threshold)``, or when that many standard errors are
    within ``rule.tolerance`` (either choice is then about as good). When profiles or budget run
    out first, the decision is :func:`undecided`'s, and so it is at once for a num_envs step whose
    difference would stay inside its noise even with every profile it may still take ("futile":
    such steps lie on a plateau, which a row may climb for several steps). ``reserve`` and ``cap``
    are as in :meth:`Ledger.fits`.
    """
    c = Comparison(kind, incumbent, candidate)
    limit = rule.max_profiles if kind == "num_envs" else rule.max_profiles_gmis
    seq = sorted((m for m in (ledger.recent(incumbent), ledger.recent(candidate)) if m), key=lambda m: m.index)
    est = gap = math.nan
    while True:
        points = {m.point for m in seq}
        if len(points) == 2:
            c.threshold = threshold(seq)
            sd = ledger.difference_sd(rule.noise, rule.prior_weight)
            g = log_ratio(seq, incumbent, sd)
            est, se = g.log, g.se
            c.ratio, c.noise = g.ratio, se
            gap = est - math.log1p(c.threshold) * (1 if candidate[1] >= incumbent[1] else -1)
            settled = None
            if abs(gap) >= rule.z * se:
                settled = ("candidate" if gap > 0 else "incumbent", "decisive")
            elif rule.z * se <= rule.tolerance:
                settled = ("candidate" if gap > 0 else "incumbent", "within tolerance")
            elif len(seq) >= limit:
                settled = (undecided(kind, incumbent, candidate, est, rule.plateau), "out of profiles")
            elif kind == "num_envs" and abs(gap) < rule.z * log_ratio(alternated(seq, limit), incumbent, sd).se:
                settled = (undecided(kind, incumbent, candidate, est, rule.plateau), "futile")
            if settled and len(seq) >= confirmations(rule, kind, settled[0]):
                return _decide(c, seq, *settled)
        nxt = candidate if candidate not in points or seq[-1].point == incumbent else incumbent
        if not ledger.fits(nxt, reserve, cap):
            verdict = undecided(kind, incumbent, candidate, est, rule.plateau) if len(points) == 2 else "incumbent"
            return _decide(c, seq, verdict, "out of budget")
        m = ledger.measure(nxt, "pair" if nxt in points else "candidate")
        if m is None:  # a candidate that does not run is skipped; an incumbent that no longer runs is replaced
            return _decide(c, seq, "unrunnable" if nxt == candidate else "candidate", "unrunnable")
        seq.append(m)


def confirmations(rule: PairRule, kind: str, verdict: str) -> int:
    """Profiles a verdict needs: one that ends a row's climb, or any between GMI counts, rests on a bracketed sequence.

    A single A-B pair carries the drift over one profile and any one-off slow spell (seen on the 2-core
    box: one profile 43% below its point's others) with nothing to expose it; such a pair once moved a
    live search to the wrong GMI count and once stopped a row short of its knee. Continuing a climb
    stays cheap (one pair): a wrong step up costs little, a wrong stop or switch costs the pick.
    """
    if kind == "num_envs":
        return rule.min_profiles if verdict == "incumbent" else 2
    return rule.min_profiles_gmis


def alternated(seq: Sequence[Measurement], limit: int) -> list[Measurement]:
    """``seq`` continued by alternating profiles up to ``limit`` (what a comparison would hold at its end).

    The profiles to come are one mean spacing of ``seq``'s apart; their rate is unknown (only the
    standard error, which does not depend on it, is read).
    """
    points = list(dict.fromkeys(m.point for m in seq))
    more = list(seq)
    step = (seq[-1].t - seq[0].t) / (len(seq) - 1) if len(seq) > 1 else 1.0
    while len(more) < limit:
        more.append(Measurement(next(p for p in points if p != more[-1].point), more[-1].t + step, 1.0, math.nan, -1))
    return more


def undecided(kind: str, incumbent: Point, candidate: Point, log_ratio: float, plateau: float) -> str:
    """The choice when the noise never let the difference clear its threshold.

    Such points lie on a plateau, where throughput hardly depends on the choice: a row keeps
    climbing to the larger num_envs unless it measured more than ``plateau`` slower (past a row's
    knee throughput sags slowly, and stopping short of the knee costs the most) and never steps
    down to a smaller one; more GMIs per GPU are taken only when they measured more than
    ``plateau`` faster (past the peak oversubscription falls off fast, and a row's best reaches
    the decision with the profile that won its climb, which flatters it).
    """
    if kind == "num_envs":
        return "candidate" if candidate[1] > incumbent[1] and log_ratio > math.log1p(-plateau) else "incumbent"
    return "candidate" if log_ratio > math.log1p(plateau) else "incumbent"


def _decide(c: Comparison, seq: list[Measurement], decision: str, reason: str) -> Comparison:
    c.measurements, c.decision, c.reason = list(seq), decision, reason
    return c


def gain_threshold(alpha: float, min_gain: float) -> Callable[[Sequence[Measurement]], float]:
    """The paper's ``Sat = R_top / R_mem >= alpha`` as the gain the paired R_top must show: alpha * R_mem.

    The gain is the larger num_envs' over the smaller's, whichever is the candidate (a row is
    climbed up and, from a warm start, down). Memory does not drift like throughput, so R_mem comes
    from the mean memory of the two points. With memory flat (R_mem <= 0) any gain counts, as in
    :func:`gmiexp.search.algorithm.saturation`; ``min_gain`` is a floor, as in the unpaired rule.
    """

    def threshold(seq: Sequence[Measurement]) -> float:
        points = list(dict.fromkeys(m.point for m in seq))
        mem = {p: statistics.fmean(m.mem for m in seq if m.point == p) for p in points}
        small, large = sorted(points, key=lambda p: p[1])
        r_mem = mem[large] / mem[small] - 1 if mem[small] > 0 else 0.0
        return max(alpha * r_mem, min_gain) if r_mem > 0 else min_gain

    return threshold


class PairedSearch:
    """Rows of GMIs per GPU from 1 upwards, each climbed in num_envs by paired decisions.

    A row's best then meets the best so far in a paired decision; when it loses, larger GMI counts
    are not profiled (throughput over GMIs per GPU rises to one peak and falls as the device is
    oversubscribed), which spends the budget on the rows that can win. A row's climb may spend a
    share of what is left (a third while three or more rows remain), and always leaves enough for its
    best to meet the best so far. The first row climbs from the
    smallest num_envs, as the paper does; a later row starts where the previous row's best put as
    many envs on the device (G * N), climbs up from there, and down when the first step up loses.
    """

    def __init__(self, profile: LengthProfiler, cost: Cost, rule: PairRule, alpha: float, min_gain: float,
                 grid_cost: float) -> None:
        self.out = SearchOutcome(method="paired")
        self.rule, self.threshold = rule, gain_threshold(alpha, min_gain)
        self.ledger = Ledger(profile, cost, rule.budget * grid_cost, rule.length, self.out)
        self.comparisons: list[Comparison] = []
        self.best: Point | None = None
        self.cap = math.inf  # what the climb of the current row may spend up to

    def reserve(self, row: Point) -> float:
        """Budget a row's climb leaves for its best to meet the best so far (A B A B), so a row never ends unjudged."""
        return 0.0 if self.best is None else 2 * self.ledger.price(self.best, row)

    def run(self, max_gmis_per_gpu: int, num_envs: Sequence[int]) -> Point | None:
        for g in range(1, max_gmis_per_gpu + 1):
            left = self.ledger.budget - self.ledger.spent
            self.cap = self.ledger.spent + left / min(3, max_gmis_per_gpu - g + 1)
            start = 0 if self.best is None else warm_start(num_envs, self.best, g)
            row = self.climb(g, num_envs, start)
            if row is None:
                continue
            if self.best is not None and self.decide("gmis", self.best, row).decision != "candidate":
                break
            self.best = row
        return self.best

    def climb(self, g: int, num_envs: Sequence[int], start: int) -> Point | None:
        """The row's best num_envs: from ``num_envs[start]`` up while the larger point wins, else down."""
        incumbent: Point | None = None
        for i, n in enumerate(num_envs[start:], start):
            if not self.ledger.fits((g, n), self.reserve((g, n)), self.cap):
                return None
            if self.ledger.measure((g, n), "init") is not None:
                incumbent, start = (g, n), i
                break
        if incumbent is None:
            return None
        first = incumbent
        for n in num_envs[start + 1:]:
            c = self.decide("num_envs", incumbent, (g, n))
            if c.decision == "unrunnable":
                continue  # as the paper does: a point that does not run is skipped
            if c.decision != "candidate":
                break
            incumbent = (g, n)
        if incumbent == first:
            for n in reversed(num_envs[:start]):
                if self.decide("num_envs", incumbent, (g, n)).decision != "candidate":
                    break
                incumbent = (g, n)
        return incumbent

    def decide(self, kind: str, incumbent: Point, candidate: Point) -> Comparison:
        if kind == "num_envs":
            c = compare(self.ledger, self.rule, kind, incumbent, candidate, self.threshold,
                        self.reserve(max((incumbent, candidate), key=lambda p: p[1])), self.cap)
        else:
            c = compare(self.ledger, self.rule, kind, incumbent, candidate, lambda seq: 0.0)
        self.comparisons.append(c)
        if c.decision == "incumbent" and kind == "num_envs":
            for s in self.out.steps[-len(c.measurements):]:
                if (s.gmis_per_gpu, s.num_envs) == candidate and s.decision == "candidate":
                    s.decision = "saturated"
        return c


def warm_start(num_envs: Sequence[int], best: Point, g: int) -> int:
    """Index of the largest num_envs that puts no more envs on the device than ``best`` does."""
    total = best[0] * best[1]
    return max([i for i, n in enumerate(num_envs) if g * n <= total], default=0)


def launch_and_steps(steps: Callable[[int, int, float], float], launch_steps: float) -> Cost:
    """The cost model: a profile's env steps (warm-up included) plus one launch priced in env steps.

    On a CPU host a launch (process start, imports, spawning the GMIs) takes about as long as a
    small point's whole measurement, so counting env steps alone would make many short profiles
    look free.
    """
    return lambda g, n, length: steps(g, n, length) + launch_steps


def measured_launch_steps(outcome: SearchOutcome, steps: Callable[[int, int, float], float]) -> float | None:
    """What a launch cost this search, in env steps: median over its profiles of (wall - steps / rate) * rate.

    Reported next to ``search.launch_steps`` so the cost model can be checked against the host.
    The warm-up runs slower than the steady rate, so this slightly overstates the launch.
    """
    costs = [(s.result.wall_s - steps(s.gmis_per_gpu, s.num_envs, s.length) / rate) * rate
             for s in outcome.steps if s.result.runnable and (rate := s.result.top * s.gmis_per_gpu) > 0]
    return statistics.median(costs) if costs else None


def grid_cost(cost: Cost, max_gmis_per_gpu: int, num_envs: Sequence[int]) -> float:
    """What the grid spends in profile-steps: every point once, at the standard profile length."""
    return sum(cost(g, n, 1.0) for g in range(1, max_gmis_per_gpu + 1) for n in num_envs)


def paired_search(profile: LengthProfiler, max_gmis_per_gpu: int, num_envs: Sequence[int], num_gpus: int,
                  alpha: float, min_gain: float = 0.0, *, cost: Cost, rule: PairRule | None = None) -> SearchOutcome:
    """Run the paired search; the outcome carries its comparisons and cost for search.json."""
    rule = rule or PairRule.of()
    total = grid_cost(cost, max_gmis_per_gpu, num_envs)
    first = cost(1, num_envs[0], rule.length)
    if first > rule.budget * total:  # a space of a few points, where one launch outweighs the budget's share
        raise ConfigError(f"invalid search.budget={rule.budget:g} for this space: one paired profile costs "
                          f"{first / total:.0%} of the grid's profiling; valid: a larger budget (up to 1), "
                          "search.grid=true or search.variant=paper for a space this small")
    search = PairedSearch(profile, cost, rule, alpha, min_gain, total)
    best = search.run(max_gmis_per_gpu, num_envs)
    out = search.out
    out.comparisons = [c.as_dict() for c in search.comparisons]
    out.cost = {"grid_profile_steps": total, "budget_profile_steps": rule.budget * total,
                "spent_profile_steps": search.ledger.spent, "cost_ratio_model": search.ledger.spent / total,
                "difference_sd": search.ledger.difference_sd(rule.noise, rule.prior_weight)}
    if best is not None:
        rates = [m.rate for m in search.ledger.measurements if m.point == best]
        for s in out.steps:
            if (s.gmis_per_gpu, s.num_envs) == best and s.decision in ("init", "candidate"):
                s.decision = "best"
        out.gmis_per_gpu, out.num_envs = best
        out.estimate = statistics.median(rates) * num_gpus
    return out





METHODS["paired"] = paired_search

