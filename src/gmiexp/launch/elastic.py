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
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gmiexp.errors import ConfigError
from gmiexp.planner.partition import gmis_per_gpu
from gmiexp.stats import Sample, Z, epoch_rates, paired_gain, steady_rate

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
    with open(run_dir / LOG_FILE, "a") as f:
        f.write(json.dumps(record, default=str) + "\n")


def read_log(run_dir: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in (run_dir / LOG_FILE).read_text().splitlines() if line.strip()]
    except OSError:
        return []


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

    def measured(self, current: int, rate: float, epochs: int,
                 samples: list[float] | None = None) -> tuple[int, str] | None:
        """A window of ``epochs`` on ``current`` measured ``rate``: the partition to move to, and why (or None).

        ``samples``: the window's per-epoch rates, from which the pair's noise is measured; without them a trial
        wins by ``noise`` alone.
        """
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
        return self._next(f"auto: gmis_per_gpu={self.trial} lost ({b:,.0f} vs {base:,.0f} env steps/s)")

    def _wins(self, windows: list[tuple[float, list[float]]], clear: bool = False) -> bool:
        """B beats A by more than the measured noise (:data:`gmiexp.stats.Z` standard errors) and at least ``noise``.

        ``windows``: A1, B (and A2 once the pair is complete), each as its rate and its epochs' rates. The gain and
        its standard error are :func:`gmiexp.stats.paired_gain`'s over the windows' epochs (each window's mean log
        rate and its spread); when a window has fewer than two epochs, over the windows' rates, with no noise to
        measure: the floor alone. ``clear``: B against A1 alone, kept without the return leg, only by three times
        the noise and at least :data:`CLEAR_WIN`.
        """
        import math

        k = 3.0 if clear else 1.0
        floor = max(k * math.log1p(self.noise), math.log1p(CLEAR_WIN) if clear else 0.0)
        if any(rate <= 0 for rate, _ in windows):
            return False
        spread = all(sum(r > 0 for r in epochs) >= 2 for _, epochs in windows)
        samples = [Sample.of_rates(i == 1, epochs) if spread else Sample(i == 1, math.log(rate))
                   for i, (rate, epochs) in enumerate(windows)]
        return paired_gain(samples).beats(floor, k * Z)

    def _win(self, to: int, current: int, rate: float, base: float) -> tuple[int, str] | None:
        old, self.incumbent = self.incumbent, to
        self.tried, self.phase = {old}, "baseline"
        why = f"auto: gmis_per_gpu={to} won ({rate:,.0f} vs {base:,.0f} env steps/s)"
        if current != to:  # on the old incumbent (the pair's second A): go to the winner, its window the baseline
            return to, f"{why}; moving to it"
        return self._next(why)  # on the winner already: its window is the new baseline

    def _next(self, why: str) -> tuple[int, str] | None:
        options = self.neighbours()
        if not options or not self.affordable():
            self.phase = "settled"
            rates = self.rates.get(self.incumbent) or [0.0]
            self.settled_rate = rates[-1]
            return None
        self.trial, self.phase = options[0], "trial"
        return self.trial, f"{why}; trying gmis_per_gpu={self.trial}"


class Reshaper:
    """The launcher asks :meth:`poll` every interval while a segment trains; it returns a :class:`Decision` or None.

    Lives across the run's segments (the app keeps it), so the explorer's measurements carry over.
    """

    def __init__(self, mode: str, run_dir: Path, current: int, reachable: list[int], launch: Any,
                 max_iterations: int) -> None:
        self.mode, self.run_dir, self.current, self.reachable = mode, run_dir, current, reachable
        self.records: list[dict[str, Any]] = []
        self.explorer = Explorer(
            reachable=reachable, incumbent=current, window=int(launch.reshape_window),
            noise=float(launch.reshape_noise), drift=float(launch.reshape_drift),
            budget_epochs=float(launch.reshape_budget) * max_iterations,
        ) if mode == "auto" and len(reachable) > 1 else None
        self.max_iterations = max_iterations
        self._seen = 0  # rows of this segment the explorer has used
        self._last_wall_s: float | None = None  # the previous partition's last row, until its cost is charged
        self._epoch_s = 0.0  # an epoch's duration in the last measured window

    def segment_started(self, current: int, last_wall_s: float | None = None) -> None:
        """A new partition started after the previous one's last row at ``last_wall_s``.

        The time between them, beyond one epoch, is charged to the explorer's budget once this partition's
        first epoch is in.
        """
        self.current, self._seen, self._last_wall_s = current, 0, last_wall_s

    def poll(self, rows: list[dict[str, Any]]) -> Decision | None:
        """``rows``: this segment's run rows so far (:class:`gmiexp.launch.live.RunRows`)."""
        epoch = int(rows[-1].get("iteration", 0)) if rows else 0
        req = take_request(self.run_dir)
        if req is not None:
            return self._requested(req, epoch, rows)
        if self.explorer is None or epoch >= self.max_iterations - 1:
            return None
        if self._last_wall_s is not None and rows and self._epoch_s > 0:  # this partition's first epoch is in
            gap = float(rows[0]["wall_s"]) - self._last_wall_s
            self.explorer.charge(max(0.0, gap - self._epoch_s) / self._epoch_s)
            self._last_wall_s = None
        # one window at a time: the first epoch of a segment is left out, then `window` epochs per measurement
        w = self.explorer.window
        if len(rows) - max(1, self._seen) < w:
            return None
        win = rows[max(0, max(1, self._seen) - 1):]
        rate = steady_rate(win, skip=1, last=w) or None  # the first row: the end of the epoch before the window
        self._seen = len(rows)
        if rate is None:
            return None
        self._epoch_s = (float(win[-1]["wall_s"]) - float(win[-w - 1]["wall_s"])) / w
        move = self.explorer.measured(self.current, rate, w, epoch_rates(win, skip=1, last=w))
        if move is None or move[0] == self.current:
            return None
        return Decision(to=move[0], frm=self.current, reason=move[1], epoch=epoch, rate_before=rate)

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
    r = Reshaper(str(launch.reshape), node_dir, current, reachable_from(plan), launch, int(plan.max_iterations))
    if r.explorer is not None and launch.reshape_prior:
        prior = prior_rates(str(launch.reshape_prior), plan)
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
