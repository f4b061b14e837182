"""A packed sweep from start to table: check every member, pick jobs_per_gpu, run the queue, report.

Exit codes follow the basic launcher's: bad input (a member's config, the launcher's) exits 2 before
anything starts; a failed member is recorded for ``main()`` (exit 1 at the end, naming its dir)
while the others go on; Ctrl-C or SIGTERM stops every member and exits 130.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf, open_dict

from gmiexp import multirun
from gmiexp.backends import mps_daemon, mps_session
from gmiexp.backends.common import visible_device
from gmiexp.config import Config
from gmiexp.config.enums import Mode
from gmiexp.errors import ConfigError, by_member, invalid
from gmiexp.hardware import Hardware, resolve
from gmiexp.launch.elastic import REQUEST_FILE, read_log, request
from gmiexp.launch.live import HistoryTail
from gmiexp.launch.ownership import running as is_running
from gmiexp.launch.requeue import resume
from gmiexp.pack import recycle, runner, sizing, slots, table
from gmiexp.pack.runner import Job
from gmiexp.pack.slots import AUTO, Member, Slot, Unit
from gmiexp.plan import Plan
from gmiexp.planner.build import build_plan
from gmiexp.planner.footprint import check_together, shared
from gmiexp.planner.resources import MORE_SHM, Need, check_space, disk_need, shm_need
from gmiexp.signals import sigterm_raises
from gmiexp.status import gmi_dir, read_history

if TYPE_CHECKING:
    from gmiexp.plan.model import GlobalBatch


def task_config(cfg: DictConfig) -> Config:
    """The typed gmiexp Config of a composed member (its ``hydra`` node dropped, as run_job does)."""
    c = copy.deepcopy(cfg)
    with open_dict(c):
        del c["hydra"]
    return OmegaConf.to_object(c)  # type: ignore[return-value]


def group_choice(overrides: list[str], group: str) -> str | None:
    hits = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0].lstrip("+~") == group]
    return hits[-1] if hits else None


def check_params(p: dict[str, Any]) -> None:
    if p["auto_max_jobs"] < 1:
        raise invalid("hydra.launcher.auto_max_jobs", p["auto_max_jobs"], "an integer >= 1")
    if not 0 <= p["auto_min_gain"] < 1:
        raise invalid("hydra.launcher.auto_min_gain", p["auto_min_gain"], "a fraction in [0, 1)")
    if p["auto_min_profile_steps"] < 0:
        raise invalid("hydra.launcher.auto_min_profile_steps", p["auto_min_profile_steps"], "an integer >= 0")
    if p["auto_warmup_iterations"] < 0 or p["auto_profile_iterations"] < 1:
        raise invalid("hydra.launcher.auto_warmup_iterations/auto_profile_iterations",
                      (p["auto_warmup_iterations"], p["auto_profile_iterations"]), "warm-up >= 0, measured >= 1")
    if not p.get("recycle_payback", 0) >= 0:
        raise invalid("hydra.launcher.recycle_payback", p["recycle_payback"], "a number >= 0")
    for key in ("auto_timeout_s", "stop_grace_s", "poll_s"):
        if not p[key] > 0:
            raise invalid(f"hydra.launcher.{key}", p[key], "a number of seconds > 0")


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class PackedSweep:
    """One packed multirun: the members (overrides, run dirs, composed configs) and the launcher's params."""

    params: dict[str, Any]
    sweep_dir: Path
    overrides: list[list[str]]
    run_dirs: list[Path]
    configs: list[DictConfig]
    prefix: list[str]  # CLI arguments before the overrides (--config-dir ...)
    compose: Callable[[list[str]], DictConfig]
    first: int = 0  # the first member's number (Hydra's job num)
    hw: Hardware | None = None
    gpus: list[int] = field(default_factory=list)
    members: list[Member] = field(default_factory=list)
    per_gpu: int | str = 1
    auto_trace: dict[str, Any] | None = None
    asked: dict[int, tuple[str, tuple[Unit, ...], tuple[Unit, ...]]] = field(default_factory=dict)  # recycle:
    # member -> (its last request, the units asked for, the units before)
    member_of: dict[int, Member] = field(default_factory=dict)  # job number -> its member
    plans: dict[Path, tuple[int, tuple[GlobalBatch | None, int]]] = field(default_factory=dict)  # recycle: plan.yaml
    #   -> (mtime, (global batch, max_iterations))
    startup: dict[int, float] = field(default_factory=dict)  # recycle: member -> its start-up's work, core-s
    pool: list[Slot] = field(default_factory=list)
    planning: bool = False  # every member mode=plan: the sweep is checked and described, nothing runs
    checked: list[Plan] = field(default_factory=list)  # each member's plan, as check made it
    tails: dict[int, tuple[int, Any]] = field(default_factory=dict)  # recycle: member -> (inode, HistoryTail)

    def check(self) -> None:
        """Validate the launcher's params and every member (composed and planned on its slot); exit 2 early."""
        self.per_gpu = slots.jobs_per_gpu(self.params["jobs_per_gpu"])
        check_params(self.params)
        typed = [task_config(c) for c in self.configs]
        self.planning = all(Mode(cfg.mode) == Mode.plan for cfg in typed)  # where each would run; nothing runs
        modes: dict[str, list[int]] = {}  # each mode refused, with its members
        for k, cfg in enumerate(typed):
            if Mode(cfg.mode) != Mode.train and not self.planning:  # its value: the enum's repr is not what was typed
                modes.setdefault(str(invalid("mode", Mode(cfg.mode).value, "train (a packed sweep runs training "
                                             "jobs), or plan for every member (where each would run)")),
                                 []).append(self.first + k)
        if modes:
            raise by_member(modes, "nothing was launched")
        self.hw = resolve(typed[0].hardware.name)
        if self.hw.is_preset and not self.planning:
            raise invalid("hardware", typed[0].hardware.name, "auto or cpu (presets only plan; a sweep runs)")
        self.gpus = slots.choose_gpus(self.hw, self.params["gpus"])
        self.members = [Member(group_choice(o, "backend"), c.gmis_per_gpu) for o, c in zip(self.overrides, typed,
                                                                                          strict=True)]
        per_gpu = 1 if self.per_gpu == AUTO else int(self.per_gpu)
        # auto packs 2 or more a GPU as soon as it profiles: a GPU that admits one process is refused as for 2
        slots.check_sharing(self.hw, self.gpus, 2 if self.per_gpu == AUTO else per_gpu, self.members)
        pool = slots.make_slots(self.hw, self.gpus, per_gpu)
        tight = slots.tightest(self.hw, pool)  # any member may run on any slot: it must fit the least

        reasons: dict[str, list[int]] = {}
        plans: list[Plan] = []
        for k, (o, m, d) in enumerate(zip(self.overrides, self.members, self.run_dirs, strict=True)):
            cfg = task_config(self.compose([*o, *self.slot_overrides(tight, m, per_gpu)]))
            try:
                plan, _ = build_plan(cfg, d, hardware=copy.deepcopy(self.hw))
                if not self.planning:  # a finished or foreign run dir exits 2 before any member starts
                    resume(plan, d, cfg.launch.resume)
                plans.append(plan)
            except ConfigError as e:  # every member's, each reason once with its members
                for reason in e.reasons:
                    reasons.setdefault(reason, []).append(self.first + k)
        if reasons:
            raise by_member(reasons, "nothing was launched")
        self.pool, self.checked = pool, plans
        self.check_at_once(per_gpu)

    def check_at_once(self, per_gpu: int) -> None:
        """Exit 2 when the members running at once (``per_gpu`` a GPU) overflow what they share.

        That is a GPU's memory (or the host's RAM), this node's ``/dev/shm`` and the sweep's file system. Each
        member passed alone.
        """
        assert self.hw is not None
        at_once = per_gpu * len(self.gpus)
        fewer = "fewer members at once (hydra.launcher.jobs_per_gpu, hydra.launcher.gpus)"
        check_together(self.checked, self.hw, self.sharing(per_gpu), "the sweep's members", fewer,
                       [f"#{self.first + k}" for k in range(len(self.checked))])
        shm, disk, who = self.space(self.checked, at_once)
        if not self.planning:
            check_space(shm, disk, self.sweep_dir, who=who,
                        shm_fixes=f"{MORE_SHM}, {fewer} or smaller channel.slots / channel.target_bytes")

    @staticmethod
    def space(plans: list[Plan], at_once: int) -> tuple[Need, Need, tuple[str, str]]:
        """Members share this node's ``/dev/shm`` (those running at once) and the sweep's file system (all of them).

        Each member's own check sees the space free when it starts, not what the others running beside it take.
        ``jobs_per_gpu=auto`` is checked at one a GPU, its least; a member of its choice checks itself at start.
        """
        running = sorted((shm_need(p) for p in plans), key=lambda n: n.total, reverse=True)[:at_once]
        shm, disk = Need("/dev/shm"), Need("run directory")
        for need in running:
            shm.include(need)
        for plan in plans:
            disk.include(disk_need(plan))
        n = len(running)
        return shm, disk, (f"the {n} member{'s' if n != 1 else ''} running at once need",
                           f"the sweep's {len(plans)} member{'s' if len(plans) != 1 else ''} will write")

    def sharing(self, per_gpu: int) -> int:
        """The members sharing one memory pool at once: ``per_gpu`` a GPU's, or all running the host's RAM."""
        assert self.hw is not None
        return per_gpu if self.hw.has_gpu else per_gpu * len(self.gpus)

    def headline(self, members: int, per_gpu: int) -> str:
        """How the members pack: ``run`` says it when they start, ``mode=plan`` shows it."""
        return f"{members} members, {per_gpu} per GPU on GPUs {self.gpus} ({len(self.pool)} at a time; the rest queue)"

    def describe(self) -> str:
        """``mode=plan`` of a packed sweep: the slots, where each member starts or that it queues, the space."""
        assert self.hw is not None
        per_gpu = 1 if self.per_gpu == AUTO else int(self.per_gpu)
        lines = [f"pack plan: {self.headline(len(self.checked), per_gpu)}" + (
            "; jobs_per_gpu=auto profiles the first member when the sweep runs and may pack more"
            if self.per_gpu == AUTO else "")]
        free, busy = list(self.pool), []
        for k, (o, m, plan) in enumerate(zip(self.overrides, self.members, self.checked, strict=True)):
            shown = " ".join(o) or "no overrides"
            what = (f"{len(plan.gmis)} GMI{'s' if len(plan.gmis) != 1 else ''}, backend {plan.backend}, "
                    f"reduction {plan.reduction}")
            if free:
                slot = runner.pick(free, busy)
                busy.append(slot)
                lines.append(f"  member #{self.first + k} ({shown}) -> {slot.name}: "
                             f"{' '.join(self.slot_overrides(slot, m, per_gpu))} ({what})")
            else:
                lines.append(f"  member #{self.first + k} ({shown}) -> queued: the first slot to free ({what})")
        shm, disk, who = self.space(self.checked, len(self.pool))
        lines.append(f"space (estimated): {who[0]} {shm.format()}; {who[1]} {disk.format()}")
        memory = shared(self.checked, self.hw, self.sharing(per_gpu))
        if memory:
            lines.append("memory (rollout buffers, at least): " + "; ".join(m.format() for m in memory))
        return "\n".join(lines)

    def slot_overrides(self, slot: Slot, member: Member, per_gpu: int | None = None) -> list[str]:
        grows = slot.cpus or slots.on_mps(slot, member)  # a core set or an MPS share can grow; a MIG instance not
        extra = ["launch.reshape=request"] if self.params.get("recycle") and grows else []
        return [*slots.slot_overrides(slot, member, int(per_gpu or self.per_gpu)), *extra]

    def choose_auto(self) -> int:
        """Profile the first member packed 1, 2, ... per GPU (paired steps); return the choice."""
        assert self.hw is not None
        cfg = task_config(self.configs[0])
        hw, gpu, member = self.hw, self.gpus[0], self.members[0]
        profiler = sizing.PackProfiler(
            workdir=self.sweep_dir / "pack_auto", overrides=sizing.profile_overrides(self.overrides[0]),
            gmis_per_gpu=cfg.gmis_per_gpu, num_envs=cfg.num_envs,
            slots_for=lambda k: [s for s in slots.make_slots(hw, self.gpus, k) if s.gpu == gpu],
            slot_overrides=lambda s, k: self.slot_overrides(s, member, k),
            warmup_iterations=self.params["auto_warmup_iterations"],
            profile_iterations=self.params["auto_profile_iterations"], timeout_s=self.params["auto_timeout_s"],
            horizon_length=cfg.train.horizon_length, min_profile_steps=self.params["auto_min_profile_steps"])
        max_jobs = min([self.params["auto_max_jobs"]] + [len(g.mig_devices) for g in hw.gpus
                                                          if g.index == gpu and g.mig_mode])  # one instance each
        say(f"pack auto: profiling the first member ({' '.join(self.overrides[0]) or 'no overrides'}) packed "
            f"1..{max_jobs} per GPU on GPU {gpu}")
        self.auto_trace = sizing.choose(profiler, max_jobs, self.params["auto_min_gain"], say)
        return int(self.auto_trace["jobs_per_gpu"])

    def fitting(self, chosen: int) -> int:
        """``chosen`` (auto's pick, profiled on the first member), or fewer where every member would not fit.

        Auto was checked at one a GPU, its least; a larger member than the profiled one may not fit ``chosen``.
        """
        for per_gpu in range(chosen, 1, -1):
            try:
                self.check_at_once(per_gpu)
                return per_gpu
            except ConfigError as e:
                say(f"pack auto: jobs_per_gpu={per_gpu} does not fit every member: {e}; trying {per_gpu - 1}")
        return 1

    def jobs(self) -> list[Job]:
        self.member_of = {int(c.hydra.job.num): m for c, m in zip(self.configs, self.members, strict=True)}
        return [Job(num=int(c.hydra.job.num), overrides=o, run_dir=d,
                    slot_overrides=lambda s, m=m: self.slot_overrides(s, m))
                for o, d, c, m in zip(self.overrides, self.run_dirs, self.configs, self.members, strict=True)]

    def recycle(self, slot: Slot, running: list[Job]) -> Job | None:
        """Hand a free slot to a running member that can grow into it (:mod:`gmiexp.pack.recycle`); None when none can.

        The member is asked through its re-shape request and does it at its next epoch boundary; the units it was
        asked onto (cores, or on a GPU its MPS shares) count as its own from then on, unless it refuses.
        """
        if slot.mig_uuid:  # a MIG instance is not handed over: its member keeps its own
            return None

        members = {j.num: j for j in running if j.slot is not None and j.slot.gpu == slot.gpu
                   and (slot.cpus or slots.on_mps(j.slot, self.member_of[j.num]))}
        growers = [self._grower(j) for j in members.values()]
        used = {c for g in growers for c in g.cores}
        if all(c in used for c in slot.units):
            return None  # asked every poll while the slot is free: nothing idle, nothing more to read
        growers = [replace(g, **self._timing(members[g.num])) for g in growers]
        growth = recycle.choose(slot.units, growers, float(self.params.get("recycle_payback", recycle.PAYBACK)))
        if growth is None:
            return None
        job, was = members[growth.num], next(g for g in growers if g.num == growth.num)
        if slot.cpus:
            overrides: dict[str, Any] = {"hardware.cpus": list(growth.cores)}
            where = f"on cores {list(growth.cores)}"
        else:  # one MPS share per GMI, together the slots it holds
            pct = slots.sm_percent(len(growth.cores), int(self.per_gpu), growth.gmis_per_gpu)
            overrides = {"backend.sm_percent": [pct] * growth.gmis_per_gpu}
            where = f"on {len(growth.cores)} of GPU {slot.gpu}'s {self.per_gpu} MPS shares ({pct}% of the SMs each)"
        rid = request(job.run_dir, growth.gmis_per_gpu, overrides)
        self.asked[job.num] = (rid, growth.cores, tuple(sorted(was.cores)))
        left = f", leaving shared cores {list(growth.left)}" if growth.left else ""
        say(f"pack: #{job.num} grows into {slot.name}: gmis_per_gpu {was.gmis_per_gpu} -> {growth.gmis_per_gpu} "
            f"{where}{left}")
        return job

    def _grower(self, job: Job) -> recycle.Grower:
        """A running member as :func:`recycle.choose` sees it: cores as last asked (refused: as before), partitions."""
        assert job.slot is not None
        plan_path = job.run_dir / "plan.yaml"
        answers = read_log(job.run_dir)
        refused = {a.get("request") for a in answers if a.get("status") == "refused"}
        rid, cores, before = self.asked.get(job.num, ("", job.slot.units, job.slot.units))
        if rid in refused:
            cores = before
        gb, _ = self._global_batch(plan_path)
        free = (gb is not None and is_running(job.run_dir) and not (job.run_dir / REQUEST_FILE).exists()
                and not (answers and answers[-1].get("status") == "refused"))  # refused (at its end): leave it be
        return recycle.Grower(job.num, frozenset(cores), gb.gmis_per_gpu if gb is not None else 1,
                              tuple(gb.reachable) if gb is not None else (), len(job.grown), free)

    def _timing(self, job: Job) -> dict[str, Any]:
        """``left_s``, ``startup_core_s`` of :class:`recycle.Grower` from the member's epochs (GMI 0's history rows).

        Time left: its epochs left at the median of its last epochs' durations (the first of a partition, which
        carries the start, left out); None until its partition has two such epochs. Start-up: its first epoch's
        end less its start, as the launcher started it, times its slot's share of the cores (every slot busy).
        """
        rows = self._rows(job)
        epochs = sorted([float(b["time"]) - float(a["time"]) for a, b in zip(rows[1:-1], rows[2:], strict=True)
                         if "time" in a and "time" in b][-10:])
        if job.num not in self.startup:
            first = read_history(job.run_dir / "segments" / "0", 0) or rows
            if first and "time" in first[0]:
                wall = max(0.0, float(first[0]["time"]) - float(job.start or first[0]["time"]))
                pool = recycle.shares({i: frozenset(s.units) for i, s in enumerate(self.pool)})
                self.startup[job.num] = wall * pool[self.pool.index(job.slot)]
        left = self._global_batch(job.run_dir / "plan.yaml")[1] - int(rows[-1]["iteration"]) if rows else 0
        return {"left_s": left * epochs[len(epochs) // 2] if len(epochs) >= 2 else None,
                "startup_core_s": self.startup.get(job.num, 0.0)}

    def _rows(self, job: Job) -> list[dict[str, Any]]:
        """GMI 0's history rows of the member's current partition, read on from where the last poll stopped.

        Asked every poll while a core is idle; a restart starts a new file (the old one moves to ``segments/``).
        """
        path = gmi_dir(job.run_dir, 0) / "history.jsonl"
        try:
            inode = path.stat().st_ino
        except OSError:
            return []
        held = self.tails.get(job.num)
        if held is None or held[0] != inode:
            held = self.tails[job.num] = (inode, HistoryTail(path))
        return held[1].read()

    def _global_batch(self, plan_path: Path) -> tuple[GlobalBatch | None, int]:
        """The member's ``plan.global_batch`` and ``max_iterations`` (None, 0 without a batch), read on a new plan.

        A load costs ~30 ms, and the launcher asks every poll (``poll_s``, 0.2 s) while a slot is free: 15% of a
        core per member, taken from the members.
        """
        try:
            stamp = plan_path.stat().st_mtime_ns
        except OSError:
            return None, 0
        seen = self.plans.get(plan_path)
        if seen is None or seen[0] != stamp:
            plan = Plan.load(plan_path)
            seen = self.plans[plan_path] = (stamp, (plan.global_batch, plan.max_iterations if plan.global_batch else 0))
        return seen[1]

    def shared_daemons(self) -> AbstractContextManager[None]:
        """Hold each MPS GPU's shared daemon for the sweep: started once, quit once, however members come and go."""
        assert self.hw is not None
        gpus = slots.mps_gpus(self.hw, self.gpus, self.members)
        if not gpus:
            return nullcontext()

        return mps_session.running([mps_daemon.shared_daemon(visible_device(self.hw, g)) for g in gpus])

    def run(self) -> int:
        """Run the members; 0 when every one ran (failures recorded for main's exit 1), 130 when interrupted."""
        assert self.hw is not None
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        multirun.state["ran"] = True
        jobs: list[Job] = []
        code = 0
        earlier = table.load(self.sweep_dir)  # a sweeper launching in batches: the earlier batches' table
        with sigterm_raises(lambda signum: KeyboardInterrupt(f"signal {signum}")):
            try:
                if self.per_gpu == AUTO and earlier and earlier.get("auto"):
                    self.per_gpu, self.auto_trace = int(earlier["jobs_per_gpu"]), earlier["auto"]
                    say(f"pack auto: jobs_per_gpu={self.per_gpu}, as chosen for this sweep's first batch")
                elif self.per_gpu == AUTO:
                    self.per_gpu = self.fitting(self.choose_auto())
                jobs = self.jobs()
                pool = self.pool = slots.make_slots(self.hw, self.gpus, int(self.per_gpu))
                say(f"pack: {self.headline(len(jobs), int(self.per_gpu))}")
                with self.shared_daemons():
                    runner.run_jobs(jobs, pool, self.prefix, self.params["poll_s"], self.params["stop_grace_s"],
                                    on_started=started, on_done=done,
                                    on_idle=self.recycle if self.params.get("recycle") else None)
            except KeyboardInterrupt:
                say("gmiexp: interrupted: every member stopped")
                code = 130
        if jobs:
            t = table.build(jobs, int(self.per_gpu), self.gpus, self.auto_trace, earlier)
            table.write(t, self.sweep_dir)
            say(table.text(t) + f"\ntable: {self.sweep_dir / table.PACK_CSV}")
        return code


def started(job: Job) -> None:
    assert job.slot is not None
    say(f"pack: #{job.num} {' '.join(job.overrides)} -> {job.slot.name}")


def done(job: Job) -> None:
    out = (job.run_dir / runner.STDOUT).read_text() if (job.run_dir / runner.STDOUT).is_file() else ""
    if out:
        print(out, end="" if out.endswith("\n") else "\n", flush=True)  # the member's own program output
    if job.status != "ok":
        multirun.record_failure(str(job.run_dir))
        err = (job.run_dir / runner.STDERR).read_text().strip().splitlines()[-5:]
        say(f"pack: #{job.num} failed (exit {job.returncode}): {job.run_dir}\n  " + "\n  ".join(err))
