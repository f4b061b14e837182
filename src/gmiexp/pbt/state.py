"""A population's log, ``<run>/pbt/state.jsonl``: reading it back, and replaying it into the controller's state.

The controller (:mod:`gmiexp.pbt.controller`) appends one JSON line per event; :mod:`gmiexp.pbt.views` derives what a
user looks at from the same lines. :func:`replay` is the one place that turns them back into what the controller
holds while it runs (each member's current life and values, the records, checkpoints and values at each interval,
the exploit and verdict counters), so the same command in the same run dir goes on with the population where the
log stops: after Ctrl-C, SIGTERM, a Slurm requeue, or a killed controller (a line cut by the kill is skipped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gmiexp.errors import ConfigError
from gmiexp.pbt.rules import Record
from gmiexp.status import read_jsonl

STATE_FILE = Path("pbt") / "state.jsonl"
#: why a member's life started (``start`` events' ``cause``): the population's start, an exploit by restart, the
#: same command again in the run dir, or a failure of its previous life
CAUSES = ("new", "exploit", "resume", "failed")


def is_population(run_dir: Path) -> bool:
    return (run_dir / STATE_FILE).is_file()


def holds_population(run_dir: Path) -> bool:
    """The run dir holds a population's members or log (a population started there, or a part of one)."""
    return (run_dir / "members").exists() or (run_dir / STATE_FILE).exists()


def refuse_never(run_dir: Path, resume: str) -> None:
    """``launch.resume=never`` in a run dir that holds a population: exit 2 (a new one would mix with it)."""
    if holds_population(run_dir) and resume == "never":
        raise ConfigError(f"invalid launch.resume=never for run dir {run_dir}: it holds a population "
                          f"({run_dir / STATE_FILE}), which a new one would mix with; valid: launch.resume=auto "
                          "(the same command goes on with it), or a new run dir (hydra.run.dir=...)")


def resumable(run_dir: Path, here: dict[str, Any], max_iterations: int) -> Replayed | None:
    """The population the run dir holds, to go on with (``launch.resume=auto``); exit 2 if it cannot be.

    As :func:`gmiexp.launch.requeue.resume` for a plain run: the same training (``here``: members, interval, what
    the checkpoints' numbers depend on, against the log's ``population`` event) goes on, ``max_iterations`` may
    grow; another is refused, and so is a population that finished with nothing left to train.
    """
    if not holds_population(run_dir):
        return None
    prev = replay(events(run_dir)) if is_population(run_dir) else None
    where = f"run dir {run_dir} for launch.resume=auto"
    if prev is None:
        raise ConfigError(f"invalid {where}: it holds members/ but no population log ({run_dir / STATE_FILE}) "
                          "says how they were started; valid: a new run dir (hydra.run.dir=...)")
    differ = [f"{k} {prev.head[k]} there, {v} here" for k, v in here.items()
              if prev.head.get(k) is not None and prev.head[k] != v]
    if differ:
        raise ConfigError(f"invalid {where}: its population trained otherwise ({'; '.join(differ)}; key: what "
                          "the checkpoints' numbers depend on, launch.requeue.SAME_TRAINING); valid: the same "
                          "command as the population that wrote it, or a new run dir (hydra.run.dir=...)")
    done = prev.max_iterations or 0
    if prev.finished and max_iterations <= done:
        raise ConfigError(f"invalid max_iterations={max_iterations} in run dir {run_dir}: the population there "
                          f"finished ({done} epochs); valid: max_iterations > {done} to train on, or a new run dir "
                          "(hydra.run.dir=...)")
    return prev


def events(run_dir: Path) -> list[dict[str, Any]]:
    """Every event of the population in the order written (whole lines: :func:`gmiexp.status.read_jsonl`)."""
    return read_jsonl(run_dir / STATE_FILE)


@dataclass
class MemberState:
    """A member as the log leaves it: its current life (the last ``start``) and the values it trains with now."""

    member: int
    life: int
    run_dir: Path
    values: dict[str, Any]
    started_frames: int  # where DexPBT's grace counts from: its last start or exploit taken
    frames: int  # the frames its current life started from
    checkpoint: str | None  # what the current life started from (None: from scratch)
    copy: bool  # the current life started from another member's state (an exploit or a replacement)
    unstarted: dict[str, Any] | None = None  # a restart decision (or a replacement) logged, its life not started


@dataclass
class Replayed:
    """The controller's state at the log's end (:func:`replay`)."""

    head: dict[str, Any]  # the first ``population`` event: how the population was started
    members: dict[int, MemberState] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    checkpoints: dict[tuple[int, int], Path] = field(default_factory=dict)
    values_at: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    exploits: int = 0
    verdicts: int = 0  # the highest verdict id logged (a later one must not repeat it in a member's run dir)
    failures: list[dict[str, Any]] = field(default_factory=list)  # every ``failed`` event
    segments: int = 1  # how many times the population was started (1 + its resumes)
    max_iterations: int | None = None  # what its latest start trained to
    finished: bool = False  # its last start ended with every member done (a ``finished`` event last)


def is_copy(e: dict[str, Any]) -> bool:
    """A start from another member's state (older logs have no ``copy``: any checkpoint was a restart exploit's)."""
    return bool(e.get("copy", e.get("checkpoint") is not None))


def rewind(records: list[Record], checkpoints: dict[tuple[int, int], Path], member: int, *, copy: bool, cause: str,
           frames: int, source_interval: int | None) -> None:
    """Forget the records (and checkpoints) of ``member``'s earlier life that its next life trains again.

    From its own checkpoint (a resume, a restart after a failure): those past ``frames``. From another member's state
    (a copy): those past ``source_interval``, where the new life goes on; the old life ran ahead of its verdict in
    restart mode, and a table that took those records would copy from a lineage that is gone, and depend on how far
    it ran before its verdict came. A member's first start forgets nothing.
    """
    if copy and source_interval is not None:
        def kept(r: Record) -> bool:
            return r.iteration <= source_interval
    elif not copy and cause in ("resume", "failed"):
        def kept(r: Record) -> bool:
            return r.frames <= frames
    else:
        return
    records[:] = [r for r in records if r.member != member or kept(r)]
    for key in [k for k in checkpoints if k[0] == member and not any(
            r.member == member and r.iteration == k[1] for r in records)]:
        del checkpoints[key]


def replay(evs: list[dict[str, Any]]) -> Replayed | None:
    """The controller's state as the events leave it (None: no population was started in them).

    It applies each event as the controller did when it wrote it: a start makes the member's current life and forgets
    what that life trains again (:func:`rewind`, as the controller did then), a record adds to the table, an exploit
    taken in place changes the member's values, a restart decision without its start (the stop came between them)
    is kept for the member to take when it goes on.
    """
    head = next((e for e in evs if e.get("event") == "population"), None)
    if head is None:
        return None
    out = Replayed(head=head, max_iterations=head.get("max_iterations"))
    decided: dict[tuple[int, Any], dict[str, Any]] = {}  # (member, verdict id) -> its in-place decision
    for e in evs:
        kind, m = e.get("event"), e.get("member")
        if kind == "start":
            copy = is_copy(e)
            rewind(out.records, out.checkpoints, m, copy=copy, cause=str(e.get("cause")),
                   frames=int(e.get("frames", 0)), source_interval=e.get("source_interval"))
            grace = e.get("grace_frames", e.get("frames", 0))
            out.members[m] = MemberState(m, int(e["life"]), Path(e["run_dir"]), dict(e.get("values") or {}),
                                         int(grace), int(e.get("frames", 0)), e.get("checkpoint"), copy)
        elif kind == "record":
            rec = Record(m, int(e["interval"]), int(e["frames"]), e.get("objective"), e.get("best"))
            out.records.append(rec)
            if e.get("checkpoint"):
                out.checkpoints[(m, rec.iteration)] = Path(e["checkpoint"])
            if m in out.members:
                out.values_at[(m, rec.iteration)] = dict(out.members[m].values)
        elif kind == "decision" and "values" in e:
            out.exploits += 1
            if e.get("id") is not None:
                out.verdicts = max(out.verdicts, int(e["id"]))
            if e.get("exploit") == "inplace":
                decided[(m, e.get("id"))] = e
            elif m in out.members:
                out.members[m].unstarted = e
        elif kind == "exploited" and "values" in e and m in out.members:
            out.members[m].values = dict(e["values"])
            d = decided.get((m, e.get("id")))
            if d is not None and d.get("source_frames") is not None:
                out.members[m].started_frames = int(d["source_frames"])
        elif kind == "failed":
            out.failures.append(e)
        elif kind == "resumed":
            out.segments += 1
            out.max_iterations = e.get("max_iterations", out.max_iterations)
    last = next((e for e in reversed(evs) if e.get("event") in ("finished", "stopped", "resumed")), None)
    out.finished = last is not None and last.get("event") == "finished"
    return out
