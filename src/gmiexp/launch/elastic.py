"""Elastic GMIs: a running job moves to another partition (GMIs per GPU) at an epoch boundary.

How a re-shape happens: the launcher writes the stop file its GMIs read after every epoch (the same one Ctrl-C
writes), so they end the epoch, GMI 0 checkpoints (weights, optimiser, normalisers, counters, learning rate and
KL state) and they exit 0. The app then plans the new partition with the same global batch
(:mod:`gmiexp.planner.partition`), realises it with the backend, and launches it resuming from that checkpoint
(:mod:`gmiexp.launch.requeue`; the loop over partitions is :mod:`gmiexp.launch.segments`): epochs and frames go
on, nothing is counted twice. One node only: several nodes
would have to stop, re-plan and rendezvous again in lock-step, which ``launch.reshape`` refuses (exit 2).

What triggers one (:class:`Reshaper`):

* ``launch.reshape=request`` or ``auto``: ``python -m gmiexp.tools.reshape <run_dir> gmis_per_gpu=N`` writes
  :data:`REQUEST_FILE`; the launcher takes it at its next poll and answers in :data:`LOG_FILE`.
* ``launch.reshape=auto``: Algorithm 2 online (:class:`Explorer`). The configured partition trains at once;
  each partition's steady rate is measured over ``launch.reshape_window`` epochs (the first epoch after a start
  left out); a neighbour (one GMI per GPU more, else fewer) is tried in a paired A-B-A (the incumbent measured
  before and after the trial, so a drifting host cancels out), and kept only if it beats the incumbent by more
  than the noise measured in those windows (:data:`gmiexp.stats.Z` standard errors of the pair's estimate, from the
  epochs' spread: :func:`gmiexp.stats.paired_gain`) and by at least ``launch.reshape_noise``. Exploring stops when
  no neighbour wins, resumes when the incumbent's rate drifts by more than ``launch.reshape_drift``, and never
  spends more than ``launch.reshape_budget`` of the run's epochs on trial partitions.
* ``auto`` moves only when the move pays (:mod:`gmiexp.launch.payback`): before a trial or a switch the explorer
  weighs the seconds the rest of the run would save against the move's cost, measured on this run (each
  re-shape's seconds, the episodes it cut), before the first by ``launch.reshape_cost_s``. A move that does not
  pay is not made; its figures go to :data:`LOG_FILE` (``status: refused``) and once to stderr.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gmiexp.errors import ConfigError
from gmiexp.launch.payback import SWITCH, TRIAL, Ledger, Remaining, Verdict, weigh
from gmiexp.planner.partition import gmis_per_gpu
from gmiexp.stats import Sample, Z, epoch_rates, paired_gain, steady_rate
from gmiexp.status import append_jsonl, read_jsonl

REQUEST_FILE = "reshape_request.json"  # in the node's run dir: what tools.reshape asks for
LOG_FILE = "reshapes.jsonl"  # every decision, done or refused, one JSON line each (tools.reshape reads it back)
STOP_TEXT = "RESHAPE"  # the stop file's content when the stop is a re-shape, not a signal


@dataclass
class Decision:
    """A move to ``to`` GMIs per GPU, decided after ``epoch``; once done, ``epoch`` is the boundary it happened at."""

    to: int
    frm: int
    reason: str
    epoch: int
    rate_before: float | None = None  # the partition's steady env steps/s when it was left
    request: str = ""  # the request id (tools.reshape), "" for auto
    overrides: dict[str, Any] = field(default_factory=dict)  # the new slice or split (partition.REQUEST_FIELDS)
    weighed: dict[str, Any] = field(default_factory=dict)  # auto: the figures that said it pays (payback.Verdict)
    decided_at: float = field(default_factory=time.time)

    def move(self) -> str:
        """``gmis_per_gpu 1 -> 2``, with what else changes (``, layout.trainers_per_gpu=2``)."""
        return f"gmis_per_gpu {self.frm} -> {self.to}" + "".join(f", {k}={v}" for k, v in self.overrides.items())


class Reshaped(Exception):  # noqa: N818 - control flow: a segment ended for a re-shape
    """The GMIs ended their epoch for a re-shape; the app plans and launches ``decision.to``."""

    def __init__(self, decision: Decision, summary: dict[str, Any]) -> None:
        super().__init__(f"re-shape to gmis_per_gpu={decision.to}")
        self.decision, self.summary = decision, summary


def request(run_dir: Path, gmis_per_gpu: int, slice_overrides: dict[str, Any] | None = None) -> str:
    """Ask the run in ``run_dir`` to re-shape at its next epoch boundary; returns the request's id.

    ``slice_overrides``: the new partition's slice as config values (``hardware.cpus``, ``backend.sm_percent``),
    e.g. a packed member growing into a finished member's cores.
    """
    rid = uuid.uuid4().hex[:8]
    tmp = run_dir / f".{REQUEST_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps({"id": rid, "gmis_per_gpu": int(gmis_per_gpu), "at": time.time(),
                               "overrides": dict(slice_overrides or {})}))
    tmp.replace(run_dir / REQUEST_FILE)
    return rid


def take_request(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / REQUEST_FILE
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    path.unlink(missing_ok=True)
    return doc


def log(run_dir: Path, record: dict[str, Any]) -> None:
    append_jsonl(run_dir / LOG_FILE, record, default=str)


def read_log(run_dir: Path) -> list[dict[str, Any]]:
    """The re-shape log's records (whole lines: the launcher may be appending one)."""
    return read_jsonl(run_dir / LOG_FILE)


CLEAR_WIN = 0.15  # a trial this much faster than the window before it is kept without the return leg: more than
#   a host's drift between two windows (the epochs' spread within a window does not measure that)


@dataclass
class Explorer:
    """Algorithm 2 online over GMIs per GPU (module docstring): what to try next, from measured windows."""

    reachable: list[int]
    incumbent: int
    window: int
    noise: float
    drift: float
    budget_epochs: float
    trial_epochs: float = 0.0  # spent exploring, in epochs: trial windows and every re-shape's lost time
    restart_epochs: float = 0.0  # the last re-shape's lost time in epochs (0 until one was measured)
    rates: dict[int, list[float]] = field(default_factory=dict)  # windows measured per partition
    samples: dict[int, list[list[float]]] = field(default_factory=dict)  # each window's per-epoch rates
    phase: str = "baseline"  # baseline -> trial -> back -> settled (-> baseline on drift)
    trial: int | None = None
    tried: set[int] = field(default_factory=set)  # neighbours that lost since the last (re)start of exploring
    settled_rate: float | None = None
    drifted: int = 0  # consecutive windows beyond reshape_drift while settled (two start exploring again)
    ledger: Ledger | None = None  # what re-shapes cost this run; None: moves are free (not weighed)
    prior: dict[int, float] = field(default_factory=dict)  # rates a mode=search run measured, by partition
    losses: list[float] = field(default_factory=list)  # how much slower each lost trial was than its incumbent
    verdict: Verdict | None = None  # the last move weighed that pays (the Reshaper's decision carries it)
    refused: list[tuple[int, Verdict]] = field(default_factory=list)  # moves weighed and not made, to be logged
    at: Remaining | None = None  # where the run stands (measured's), for weighing

    def neighbours(self) -> list[int]:
        i = self.reachable.index(self.incumbent)
        up = self.reachable[i + 1:i + 2]
        down = self.reachable[i - 1:i] if i > 0 else []
        return [n for n in (*up, *down) if n not in self.tried]

    def affordable(self) -> bool:
        """A trial (there, a window, and maybe back: two re-shapes) fits in what is left of the budget."""
        restarts = 2 * (self.restart_epochs or self.window)
        return self.trial_epochs + self.window + 1 + restarts <= self.budget_epochs

    def charge(self, epochs: float) -> None:
        """A re-shape lost ``epochs`` epochs' worth of time (stop, start, first epoch): it counts in the budget."""
        self.restart_epochs = max(0.0, epochs)
        self.trial_epochs += self.restart_epochs

    def measured(self, current: int, rate: float, epochs: int, samples: list[float] | None = None,
                 at: Remaining | None = None) -> tuple[int, str] | None:
        """A window of ``epochs`` on ``current`` measured ``rate``: the partition to move to, and why (or None).

        ``samples``: the window's per-epoch rates, from which the pair's noise is measured; without them a trial
        wins by ``noise`` alone. ``at``: where the run stands; with a :attr:`ledger` every trial and switch is
        weighed against it (:func:`gmiexp.launch.payback.weigh`), a move that does not pay is not made.
        """
        self.at, self.verdict = at, None
        self.rates.setdefault(current, []).append(rate)
        self.samples.setdefault(current, []).append(list(samples or []))
        if current != self.incumbent:
            self.trial_epochs += epochs
        if self.phase == "settled":
            moved = rate / self.settled_rate - 1 if self.settled_rate else 0.0
            self.drifted = self.drifted + 1 if abs(moved) > self.drift else 0
            if self.drifted >= 2:  # two windows in a row: the workload changed, not a noisy window
                self.phase, self.tried, self.drifted = "baseline", set(), 0
                return self._next(f"auto: throughput drifted {moved:+.0%} since settling")
            return None
        if self.phase == "baseline":
            return self._next("auto: trying a neighbour")
        if self.phase == "trial":
            base = self.rates[self.incumbent][-1]
            if self._wins([(base, self.samples[self.incumbent][-1]), (rate, self.samples[current][-1])], clear=True):
                return self._win(current, current, rate, base)  # a clear win needs no return leg
            self.phase = "back"
            return self.incumbent, f"auto: back to gmis_per_gpu={self.incumbent} (the A-B-A pair's second A)"
        # phase back: the pair is complete
        a1, a2 = self.rates[self.incumbent][-2:]
        b = self.rates[self.trial][-1] if self.trial is not None else 0.0
        base = (a1 + a2) / 2
        s1, s2 = self.samples[self.incumbent][-2:]
        sb = self.samples[self.trial][-1] if self.trial is not None else []
        if self._wins([(a1, s1), (b, sb), (a2, s2)]):
            return self._win(self.trial, current, b, base)  # type: ignore[arg-type]
        self.tried.add(self.trial)  # type: ignore[arg-type]
        self.losses.append(max(0.0, 1 - b / base) if base > 0 else 0.0)
        return self._next(f"auto: gmis_per_gpu={self.trial} lost ({b:,.0f} vs {base:,.0f} env steps/s)")

    def _wins(self, windows: list[tuple[float, list[float]]], clear: bool = False) -> bool:
        """B beats A by more than the measured noise (:data:`gmiexp.stats.Z` standard errors) and at least ``noise``.

        ``windows``: A1, B (and A2 once the pair is complete), each as its rate and its epochs' rates. The gain and
        its standard error are :func:`gmiexp.stats.paired_gain`'s over the windows' epochs (each window's mean log
        rate and its spread); when a window has fewer than two epochs, over the windows' rates, with no noise to
        measure: the floor alone. ``clear``: B against A1 alone, kept without the return leg, only by three times
        the noise and at least :data:`CLEAR_WIN`.
        """
        k = 3.0 if clear else 1.0
        floor = max(k * math.log1p(self.noise), math.log1p(CLEAR_WIN) if clear else 0.0)
        if any(rate <= 0 for rate, _ in windows):
            return False
        spread = all(sum(r > 0 for r in epochs) >= 2 for _, epochs in windows)
        samples = [Sample.of_rates(i == 1, epochs) if spread else Sample(i == 1, math.log(rate))
                   for i, (rate, epochs) in enumerate(windows)]
        return paired_gain(samples).beats(floor, k * Z)

    def _win(self, to: int, current: int, rate: float, base: float) -> tuple[int, str] | None:
        why = f"auto: gmis_per_gpu={to} won ({rate:,.0f} vs {base:,.0f} env steps/s)"
        if current != to and not self._pays(SWITCH, to, base, rate / base - 1 if base > 0 else 0.0):
            self.tried.add(to)  # faster, but the rest of the run is too short to win the move back: stay
            return self._settle()
        old, self.incumbent = self.incumbent, to
        self.tried, self.phase = {old}, "baseline"
        if current != to:  # on the old incumbent (the pair's second A): go to the winner, its window the baseline
            return to, f"{why}; moving to it"
        return self._next(why)  # on the winner already: its window is the new baseline

    def _next(self, why: str) -> tuple[int, str] | None:
        options = self.neighbours()
        if not options or not self.affordable():
            return self._settle()
        rate = (self.rates.get(self.incumbent) or [0.0])[-1]
        for n in options:
            if self._pays(TRIAL, n, rate, self.hoped(n)):
                self.trial, self.phase = n, "trial"
                return self.trial, f"{why}; trying gmis_per_gpu={self.trial}"
        return self._settle()

    def _settle(self) -> None:
        self.phase = "settled"
        self.settled_rate = (self.rates.get(self.incumbent) or [0.0])[-1]
        return None

    def hoped(self, n: int) -> float:
        """The gain a trial of ``n`` is weighed at: what a mode=search run measured for it, else ``reshape_noise``.

        ``reshape_noise`` is the smallest gain that counts: a trial is made only when a win that small would pay
        for it, its way back included. Not the pair's measured noise: on a noisy host that is large (+19.5% on the
        loaded 2-core host), and hoping for it let a 75-epoch Ant run explore.
        """
        base = self.prior.get(self.incumbent)
        if base and self.prior.get(n):
            return self.prior[n] / base - 1
        return self.noise

    def _pays(self, move: str, to: int, rate: float, gain: float) -> bool:
        """Weigh ``move`` to ``to`` (:func:`gmiexp.launch.payback.weigh`); one that does not pay goes to refused.

        Without a ledger, or before the run's position is known, every move pays.
        """
        if self.ledger is None or self.at is None or rate <= 0 or self.at.epoch_frames <= 0:
            return True
        # a trial may lose as much as it hopes to win (in log rate), until this run's lost trials measured it
        loss = max(self.losses) if self.losses else gain / (1 + gain) if gain > -1 else 0.0
        v = weigh(move, rate, gain, self.at, self.ledger.cost(self.at), window=self.window, loss=loss)
        if v.pays:
            self.verdict = v
        else:
            self.refused.append((to, v))
        return v.pays


class Reshaper:
    """The launcher asks :meth:`poll` every interval while a segment trains; it returns a :class:`Decision` or None.

    Lives across the run's segments (the app keeps it), so the explorer's measurements carry over.
    """

    def __init__(self, mode: str, run_dir: Path, current: int, reachable: list[int], launch: Any,
                 max_iterations: int, envs: int = 0) -> None:
        """``envs``: the run's environments (each one's episode in progress is cut by a re-shape)."""
        self.mode, self.run_dir, self.current, self.reachable = mode, run_dir, current, reachable
        self.records: list[dict[str, Any]] = []
        self.explorer = Explorer(
            reachable=reachable, incumbent=current, window=int(launch.reshape_window),
            noise=float(launch.reshape_noise), drift=float(launch.reshape_drift),
            budget_epochs=float(launch.reshape_budget) * max_iterations,
            ledger=Ledger(prior_s=float(launch.reshape_cost_s), envs=int(envs)),
        ) if mode == "auto" and len(reachable) > 1 else None
        self.max_iterations = max_iterations
        self._seen = 0  # rows of this segment the explorer has used
        self._last_wall_s: float | None = None  # the previous partition's last row, until its cost is charged
        self._epoch_s = 0.0  # a steady epoch's duration, from the latest segment with two rows or more
        self._said: set[tuple[str, int, int]] = set()  # refused moves already said on stderr

    def segment_started(self, current: int, last_wall_s: float | None = None) -> None:
        """A new partition started after the previous one's last row at ``last_wall_s``.

        The time between them, beyond one epoch, is this re-shape's cost: logged, kept in the explorer's ledger
        and charged to its budget once this partition's first epoch is in.
        """
        self.current, self._seen, self._last_wall_s = current, 0, last_wall_s

    def segment_ended(self, summary: dict[str, Any]) -> None:
        """A partition that a re-shape started has ended: its GMI 0's resume report counts the episodes cut."""
        restarts = [r for r in self.records if not r.get("live")]
        report = ((summary.get("gmis") or {}).get("0") or {}).get("resume") or {}
        cut, frames = report.get("episodes_cut"), report.get("frames_cut")
        if not restarts or cut is None:
            return
        frames = None if frames is None else int(frames)
        if self.explorer is not None and self.explorer.ledger is not None:
            self.explorer.ledger.cuts.append((int(cut), frames))
        self.note({"status": "cut", "epoch": restarts[-1]["epoch"], "from": restarts[-1]["from"],
                   "to": restarts[-1]["to"], "episodes_cut": int(cut), "frames_cut": frames})

    def poll(self, rows: list[dict[str, Any]]) -> Decision | None:
        """``rows``: this segment's run rows so far (:class:`gmiexp.launch.live.RunRows`)."""
        epoch = int(rows[-1].get("iteration", 0)) if rows else 0
        req = take_request(self.run_dir)
        if req is not None:
            return self._requested(req, epoch, rows)
        if self._last_wall_s is not None and rows:  # this partition's first epoch is in
            self._measured_cost(rows[0])
        self._epoch_s = _epoch_s(rows) or self._epoch_s
        if self.explorer is None or epoch >= self.max_iterations - 1:
            return None
        # one window at a time: the first epoch of a segment is left out, then `window` epochs per measurement
        w = self.explorer.window
        if len(rows) - max(1, self._seen) < w:
            return None
        win = rows[max(0, max(1, self._seen) - 1):]
        rate = steady_rate(win, skip=1, last=w) or None  # the first row: the end of the epoch before the window
        self._seen = len(rows)
        if rate is None:
            return None
        move = self.explorer.measured(self.current, rate, w, epoch_rates(win, skip=1, last=w),
                                      at=self._remaining(rows, epoch))
        self._say_refused(epoch)
        if move is None or move[0] == self.current:
            return None
        verdict = self.explorer.verdict
        return Decision(to=move[0], frm=self.current, reason=move[1], epoch=epoch, rate_before=rate,
                        weighed=verdict.record() if verdict is not None else {})

    def _measured_cost(self, first: dict[str, Any]) -> None:
        """The last re-shape's own seconds: the previous partition's last epoch to this one's first, less an epoch.

        That one steady epoch would have trained anyway; the rest is the stop, checkpoint, re-plan, relaunch and
        the warm-up epoch's excess.
        """
        gap = float(first["wall_s"]) - float(self._last_wall_s or 0.0)
        self._last_wall_s = None
        cost = max(0.0, gap - self._epoch_s)
        restarts = [r for r in self.records if not r.get("live")]
        if self.explorer is not None:
            if self._epoch_s > 0:
                self.explorer.charge(cost / self._epoch_s)
            if self.explorer.ledger is not None:
                self.explorer.ledger.seconds.append(cost)
        last = restarts[-1] if restarts else {}
        self.note({"status": "cost", "epoch": last.get("epoch"), "from": last.get("from"), "to": last.get("to"),
                   "seconds": round(gap, 3), "epoch_s": round(self._epoch_s, 3), "cost_s": round(cost, 3)})

    def _remaining(self, rows: list[dict[str, Any]], epoch: int) -> Remaining:
        """Where the run stands after ``epoch``: this segment's ``rows`` give an epoch's frames and the episodes."""
        frames = [float(r.get("frames", 0.0)) for r in rows]
        epoch_frames = frames[-1] - frames[-2] if len(frames) >= 2 else frames[-1]
        length = rows[-1].get("episode/length")
        envs = self.explorer.ledger.envs if self.explorer is not None and self.explorer.ledger else 0
        steps = (frames[-1] - frames[0] + epoch_frames) / envs if envs else math.inf
        return Remaining(epochs=float(self.max_iterations - epoch), epoch_frames=epoch_frames,
                         episode_length=float(length) if length is not None else None, steps_per_env=steps)

    def _say_refused(self, epoch: int) -> None:
        """Log every move the explorer weighed and did not make; say each kind of move once on stderr."""
        if self.explorer is None:
            return
        for to, v in self.explorer.refused:
            why = f"auto: {v.move} of gmis_per_gpu={to} does not pay: {v.why()}"
            self.note({"request": "", "status": "refused", "epoch": epoch, "from": self.current, "to": to,
                       "why": why, **v.record()})
            if (v.move, self.current, to) not in self._said:
                self._said.add((v.move, self.current, to))
                print(f"gmiexp: re-shape {why}; staying on gmis_per_gpu={self.current}", file=sys.stderr,
                      flush=True)
        self.explorer.refused.clear()

    def _requested(self, req: dict[str, Any], epoch: int, rows: list[dict[str, Any]]) -> Decision | None:
        to = int(req.get("gmis_per_gpu", 0))
        why = None
        if to == self.current and not req.get("overrides"):  # same GMIs on another slice (a packed member's cores)
            why = f"the run already has gmis_per_gpu={to}"
        elif to not in self.reachable:
            why = f"gmis_per_gpu={to} cannot share the global batch; valid: {self.reachable}"
        elif epoch >= self.max_iterations:
            why = "the run is at its last epoch"
        if why:
            self.note({"request": req.get("id", ""), "status": "refused", "why": why, "epoch": epoch})
            return None
        rate = steady_rate(rows, skip=1, last=min(len(rows) - 1, 3)) or None if len(rows) > 2 else None
        if self.explorer is not None:  # a user's choice is the new incumbent; exploring starts again from it
            self.explorer.incumbent, self.explorer.phase, self.explorer.tried = to, "baseline", set()
        return Decision(to=to, frm=self.current, reason=f"request {req.get('id', '')}", epoch=epoch,
                        rate_before=rate, request=str(req.get("id", "")), overrides=dict(req.get("overrides") or {}))

    def note(self, record: dict[str, Any]) -> None:
        log(self.run_dir, record)

    def done(self, d: Decision, **timing: Any) -> dict[str, Any]:
        """Record a completed re-shape (summary.json's ``reshapes``, the log tools.reshape reads)."""
        rec = {**asdict(d), "status": "done", **timing}
        rec["from"] = rec.pop("frm")
        self.records.append(rec)
        self.note(rec)
        return rec


def _epoch_s(rows: list[dict[str, Any]]) -> float:
    """The median steady epoch's duration among ``rows`` (a segment's; its first epoch left out), 0 without one."""
    spans = sorted(float(b["wall_s"]) - float(a["wall_s"]) for a, b in zip(rows, rows[1:], strict=False))
    return spans[len(spans) // 2] if spans else 0.0


def reachable_from(plan: Any) -> list[int]:
    return list(plan.global_batch.reachable) if plan.global_batch is not None else []


def prior_rates(path: str, plan: Any) -> dict[int, float]:
    """System env steps/s a ``mode=search`` run profiled for this run's partitions, by GMIs per GPU.

    ``path``: that run's ``search.json``. A profiled point is one of this run's partitions when its ``num_envs``
    is what the partition gives each simulator GMI out of the global batch; its rate is the point's per-GMI
    ``top`` times the GMIs. The fastest profile of a point counts (the search's own rule for repeats).
    """
    try:
        trace = json.loads(Path(path).read_text())["trace"]
        points = [(int(s["gmis_per_gpu"]), int(s["num_envs"]), bool(s["runnable"]), float(s["top"]))
                  for s in trace]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"invalid launch.reshape_prior={path}: no profiles in it ({type(e).__name__}: {e}); "
                          "valid: the search.json a mode=search run wrote in its run dir") from None
    batch = plan.global_batch
    gpus = len(plan.gpu_map())
    rates: dict[int, float] = {}
    for g, n, runnable, top in points:
        if runnable and batch is not None and batch.envs_for(g) == n:
            rates[g] = max(rates.get(g, 0.0), top * g * gpus)
    return rates


def reshaper_for(plan: Any, node_dir: Path) -> Reshaper | None:
    """The run's :class:`Reshaper` (None with ``launch.reshape=off``), from ``plan.launch``.

    ``launch.reshape_prior``: the neighbours a ``mode=search`` run measured losing to the starting partition
    count as tried, so exploring starts where the search left off.
    """
    launch = plan.launch
    if launch.reshape == "off":
        return None
    (node_dir / REQUEST_FILE).unlink(missing_ok=True)  # a request left by an earlier attempt is stale
    current = gmis_per_gpu(plan)
    r = Reshaper(str(launch.reshape), node_dir, current, reachable_from(plan), launch, int(plan.max_iterations),
                 envs=plan.total_envs())
    if r.explorer is not None and launch.reshape_prior:
        prior = prior_rates(str(launch.reshape_prior), plan)
        r.explorer.prior = dict(prior)
        if current in prior:
            lost = {g for g, rate in prior.items()
                    if g != current and rate <= prior[current] * (1 + r.explorer.noise)}
            r.explorer.tried |= lost
            r.note({"status": "prior", "source": str(launch.reshape_prior), "rates": prior,
                    "not_tried": sorted(lost)})
            if lost:
                print(f"gmiexp: re-shape auto: mode=search measured gmis_per_gpu {sorted(lost)} no faster than "
                      f"{current} at this batch; they are not tried", file=sys.stderr, flush=True)
    return r
