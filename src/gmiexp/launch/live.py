"""The run's per-epoch rows, composed while it trains from every GMI's ``history.jsonl``, and sent as they come.

Each GMI appends one row per epoch (iteration) to ``gmis/<id>/history.jsonl``, in its own terms (its frames,
its times). A *run row* says the same things for the whole run, so a name means one thing in the summary's
``history``, W&B, TensorBoard, the report and the terminal:

* ``frames``: env steps of every GMI that steps a simulator, up to this iteration (plus a resumed run's start);
* ``perf/env_steps_per_s``: the steady rate so far (the summary's, computed on the rows so far), and
  ``perf/epoch_env_steps_per_s`` this iteration's; ``perf/gmi/<id>/env_steps_per_s`` each GMI's steady rate;
* ``wall_s``: seconds since the launch began (the summary's ``wall_s`` at the end);
* ``time/*_s``: running totals, averaged over the GMIs that have them (the summary's at the end);
* ``reward/mean`` and ``episode/length`` (and an rsl_rl run's RND parts, ``reward/extrinsic_mean`` and
  ``reward/intrinsic_mean``): the run-wide episode window. The PPO layouts' GMIs hold it
  themselves (every GMI the same figure, :mod:`gmiexp.rl.rlgames.episodes`); where simulator GMIs list their
  finished episodes (``episodes/returns``, serving and experience layouts) it is the mean of the last
  ``games_to_track`` over every GMI (:func:`gmiexp.stats.last_episodes`). ``gmi/<id>/reward/mean`` is each
  simulator GMI's own window;
* ``info/<key>``: ``train.info_key``'s value, averaged over the GMIs by the GMIs themselves (the lead's row);
* the lead GMI's (the first simulator GMI reporting rewards) rl-games' losses (``loss/*``) and optimiser
  figures (``train/*``), and the trainer GMIs' (experience layouts): the first trainer's ``loss/*`` and
  ``train/*``, ``async/train_samples_per_s`` summed over trainers.

A row for iteration ``i`` is sent once every simulator GMI of this node has written its row ``i`` (or, at the
end, with what there is). The sinks are W&B (:mod:`gmiexp.launch.wandb_sink`, frames as the step metric) and TensorBoard
(``<run_dir>/tensorboard``, every layout, the same names, frames as the step).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Protocol

from gmiexp.launch import wandb_sink as metrics
from gmiexp.launch.summary import lead_gmi
from gmiexp.plan import Plan
from gmiexp.planner.partition import gmis_per_gpu
from gmiexp.stats import last_episodes, steady_rate
from gmiexp.status import gmi_dir

LEAD_PREFIXES = ("reward/", "episode/", "loss/", "train/", "sync/", "async/policy_version", "async/lag",
                 "replay/", "info/", "iteration")
GAMES_TO_TRACK = 100  # rl-games' default episode window (``config.games_to_track``)
TRAINER_PREFIXES = ("loss/", "train/")  # the first trainer's, where the lead GMI has none (experience layouts)
#: a GMI row's episode lists -> the run row's window over every GMI (RND's parts: rsl_rl GMIs with RND)
RUN_WINDOWS = {"episodes/returns": "reward/mean", "episodes/lengths": "episode/length",
               "episodes/extrinsic": "reward/extrinsic_mean", "episodes/intrinsic": "reward/intrinsic_mean"}


class Sink(Protocol):
    def log(self, row: dict[str, float]) -> None: ...

    def close(self, summary: dict[str, Any] | None) -> None: ...


def numbers(row: dict[str, Any]) -> dict[str, float]:
    """The finite numeric values of a row (what W&B and TensorBoard can plot)."""
    return {k: v for k, v in row.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class HistoryTail:
    """Rows appended to one GMI's ``history.jsonl`` since the last read (a half-written last line waits)."""

    def __init__(self, path: Path) -> None:
        self.path, self.pos, self.rows = path, 0, []

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except OSError:
            return self.rows
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            if line.strip():
                self.rows.append(json.loads(line))
        self.pos += end
        return self.rows


class RunRows:
    """Composes run rows from this node's GMI histories (see the module docstring)."""

    def __init__(self, plan: Plan, run_dir: Path, t0: float | None = None) -> None:
        self.plan, self.t0 = plan, time.time() if t0 is None else t0
        local = [g.id for g in plan.local_gmis]
        self.sims = [g for g in local if plan.gmi(g).has("simulator")] or local
        self.trainers = [g for g in local if g not in self.sims]
        self.tails = {g: HistoryTail(gmi_dir(run_dir, g) / "history.jsonl") for g in local}
        self.rows: list[dict[str, Any]] = []
        self.frames0 = 0  # frames trained before this partition started (a re-shaped run)
        self.gmis_per_gpu = gmis_per_gpu(plan)
        self.trainers_per_gpu = plan.global_batch.trainers_per_gpu if plan.global_batch else None  # experience split

    def lead(self) -> int:
        return lead_gmi({g: self.tails[g].rows for g in self.sims})

    def poll(self, final: bool = False) -> list[dict[str, Any]]:
        """New run rows since the last poll; ``final``: also the iterations some GMIs never reached."""
        for tail in self.tails.values():
            tail.read()
        sims = {g: self.tails[g].rows for g in self.sims}
        have = [len(r) for r in sims.values()]
        n = max(have) if final else min(have)
        new = [self._row(i) for i in range(len(self.rows), n)]
        self.rows += new
        return new

    def _row(self, i: int) -> dict[str, Any]:
        lead = self.lead()
        sims = {g: self.tails[g].rows[: i + 1] for g in self.sims if self.tails[g].rows}
        lead_rows = self.tails[lead].rows
        me = lead_rows[min(i, len(lead_rows) - 1)] if lead_rows else {}
        row: dict[str, Any] = {k: v for k, v in me.items() if k.startswith(LEAD_PREFIXES)}
        reached = [r[i] for g in self.sims if len(r := self.tails[g].rows) > i and "iteration" in r[i]]
        if reached:  # a final row the lead stopped short of (agents stop on their own): its own iteration
            row["iteration"] = reached[0]["iteration"]
        start = int(sims[lead][0].get("frames0", 0)) if sims.get(lead) else 0
        start = start or self.frames0  # a re-shaped run's next partition goes on from the frames before
        row["frames"] = start + sum(int(r.get("local_frames", 0)) for rows in sims.values() for r in rows)
        t = max((rows[-1].get("time", 0.0) for rows in sims.values()), default=0.0)
        row["wall_s"] = max(0.0, t - self.t0) if t else time.time() - self.t0
        per = {g: steady_rate(rows, "local_frames", cumulative=False)
               if all("local_frames" in r and "wall_s" in r for r in rows) else 0.0 for g, rows in sims.items()}
        row["perf/env_steps_per_s"] = sum(per.values())
        row["perf/epoch_env_steps_per_s"] = sum(float(rows[-1].get("perf/env_steps_per_s", 0.0))
                                                for rows in sims.values())
        row.update({f"perf/gmi/{g}/env_steps_per_s": v for g, v in per.items()})
        row.update(self._episodes(sims))
        row["partition/gmis_per_gpu"] = self.gmis_per_gpu
        if self.trainers_per_gpu is not None:
            row["partition/trainers_per_gpu"] = self.trainers_per_gpu
        latest = {g: rows[-1] for g, rows in sims.items()}
        for g in self.trainers:  # a trainer's newest row written by the time of this iteration
            done = [r for r in self.tails[g].rows if not t or r.get("time", 0.0) <= t]
            if done:
                latest[g] = done[-1]
        times = sorted({k for r in latest.values() for k in r if k.startswith("time/")})
        for k in times:
            vals = [r[k] for r in latest.values() if k in r]
            row[k] = sum(vals) / len(vals)
        if self.trainers:
            rates = [latest[g].get("async/train_samples_per_s") for g in self.trainers if g in latest]
            if any(v is not None for v in rates):
                row["async/train_samples_per_s"] = sum(v for v in rates if v is not None)
            first = latest.get(self.trainers[0], {})
            row.update({k: v for k, v in first.items() if k.startswith(TRAINER_PREFIXES) and k not in row})
        return row


    def _episodes(self, sims: dict[int, list[dict[str, Any]]]) -> dict[str, float]:
        """The run-wide return and length where the GMIs list their episodes, and each GMI's own return."""
        out = {f"gmi/{g}/reward/mean": float(rows[-1]["gmi/reward/mean"]) for g, rows in sims.items()
               if rows and rows[-1].get("gmi/reward/mean") is not None}
        if any("episodes/returns" in r for rows in sims.values() for r in rows[-1:]):
            window = int(self.plan.train.rlgames_config.get("games_to_track", GAMES_TO_TRACK))
            for key, name in RUN_WINDOWS.items():
                values = last_episodes(sims, window, key)
                if values:
                    out[name] = sum(values) / len(values)
        return out


class LiveLog:
    """Sends run rows to W&B and TensorBoard as the launcher's watchdog polls; :meth:`finish` at the end."""

    def __init__(self, plan: Plan, run_dir: Path, sinks: list[Sink], t0: float | None = None) -> None:
        self.plan, self.run_dir, self.sinks = plan, run_dir, sinks
        self.rows = RunRows(plan, run_dir, t0)
        self.earlier: list[dict[str, Any]] = []  # a re-shaped run's rows of its earlier partitions
        self.finished = False

    @classmethod
    def open(cls, plan: Plan, run_dir: Path) -> LiveLog:
        """TensorBoard always; W&B when ``logger=wandb`` (offline unless ``logger.mode=online``)."""
        sinks: list[Sink] = [TensorBoardSink(run_dir / "tensorboard")]
        if metrics.enabled(plan):
            sinks.append(metrics.WandbSink(plan, run_dir))
        return cls(plan, run_dir, sinks)

    @property
    def last(self) -> dict[str, Any] | None:
        return self.rows.rows[-1] if self.rows.rows else (self.earlier[-1] if self.earlier else None)

    @property
    def all_rows(self) -> list[dict[str, Any]]:
        """Every run row sent, across a re-shaped run's partitions."""
        return self.earlier + self.rows.rows

    def next_segment(self, plan: Plan) -> None:
        """A re-shape: the next partition's GMIs write new histories; the sinks, the clock and the frames go on.

        Every row carries ``partition/gmis_per_gpu`` (and an experience layout's ``partition/trainers_per_gpu``), so
        W&B and TensorBoard show when the partition changed.
        """
        self.poll(final=True)
        self.earlier += self.rows.rows
        self.plan, self.rows = plan, RunRows(plan, self.run_dir, self.rows.t0)
        self.rows.frames0 = int(self.earlier[-1]["frames"]) if self.earlier else 0

    def poll(self, final: bool = False) -> list[dict[str, Any]]:
        new = self.rows.poll(final)
        for row in new:
            vals = numbers(row)
            for s in self.sinks:
                s.log(vals)
        return new

    def finish(self, summary: dict[str, Any] | None) -> None:
        """Send the rows not sent yet, then the summary; close every sink (once)."""
        if self.finished:
            return
        self.finished = True
        try:
            self.poll(final=True)
        finally:
            for s in self.sinks:
                s.close(summary)


class TensorBoardSink:
    """``torch.utils.tensorboard`` event files with the run rows' names, frames as the step."""

    def __init__(self, log_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, row: dict[str, float]) -> None:
        step = int(row.get("frames", 0))
        for k, v in row.items():
            if k != "frames":
                self.writer.add_scalar(k, v, global_step=step)
        self.writer.flush()

    def close(self, summary: dict[str, Any] | None) -> None:
        self.writer.close()
