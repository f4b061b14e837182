"""The population controller: members as packed runs, the exploit in place or by the anchors' restart, lineage.

``python -m gmiexp pbt=...`` runs each member as a normal gmiexp run (rl-games' PPO, tcg_ex) in its own process
group on one of the pack launcher's slots (:mod:`gmiexp.pack.slots`), all at once, under
``<run>/members/<m>/life<k>/`` (a life: one start of the member, from scratch or from a checkpoint). The members
save a checkpoint every interval (``train.save_frequency``: ``pbt.interval_steps`` rounded to whole epochs), and the
controller tails each member's ``history.jsonl``: at an interval's last epoch it posts the member's ``Record`` (the
run-wide return there, and its best within the interval) and asks :func:`gmiexp.pbt.rules.decide` with the others'
records at equal or fewer frames, as the anchors do when a member crosses an interval. With ``pbt.exploit=restart``
a member that mutates is stopped (SIGINT to its group, as the pack launcher stops members) and started again as its
next life from its source's checkpoint of that interval (copied into the new life, so the lineage does not depend on
the source's files) with the mutated ``train.*`` values as overrides: the anchors' ``os.execv`` with
``--checkpoint``. Frames the member trained past the checkpoint are lost, as the anchors lose them.

With ``pbt.exploit=inplace`` (the default) no member stops: each publishes its state into a shared-memory segment at
every interval's end and waits there for its verdict, which names, for an underperformer, its source's segment and
the values to go on with; its GMIs take them at that boundary and acknowledge (:mod:`gmiexp.rl.exploit`). The
segments go under the controller's own run tag: unlinked once no decision needs them, at the end, and by a later
launcher's sweep if the controller was killed.

Everything that happened goes to ``<run>/pbt/state.jsonl`` (starts, records, decisions with the values taken, the
in-place exploits taken); at the end the best member's last checkpoint is copied with its policy record into
``<run>/pbt/best/``, which ``mode=eval checkpoint=...`` plays. Not built yet (refused with exit 2 by
:func:`refuse_unbuilt`): rsl_rl members, info-key objectives, several nodes; nor resuming a population or replacing
a failed member (a failed member stops the population, exit 1).
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from gmiexp.backends import mps_daemon, mps_session
from gmiexp.backends.common import visible_device
from gmiexp.config import Config
from gmiexp.config.schema import PBT_KEYS
from gmiexp.errors import ConfigError, LaunchError
from gmiexp.hardware import resolve
from gmiexp.launch.requeue import EPOCH_IN_NAME, latest_checkpoint
from gmiexp.pack import runner, slots
from gmiexp.pack.runner import Job
from gmiexp.pbt import views
from gmiexp.pbt.members import OBJECTIVE, refuse_unbuilt, starting_values
from gmiexp.pbt.mutation import mutate
from gmiexp.pbt.rules import Record, Rules, decide, member_rng, member_seed, start_values, table_at
from gmiexp.planner.build import build_plan
from gmiexp.rl import exploit
from gmiexp.rl.rlgames.checkpoint import for_another_run
from gmiexp.rl.rlgames.record import RECORD
from gmiexp.shm.cleanup import cleanup_run
from gmiexp.shm.names import launcher_tag
from gmiexp.signals import sigterm_raises
from gmiexp.status import read_history

STATE = "state.jsonl"
#: what the controller sets on every member itself: the user's overrides of these are dropped
OWNED = ("checkpoint", "launch.resume", "train.save_frequency", "hydra.run.dir", "mode", "seed", "logger.group",
         "logger.tags")


def member_overrides(overrides: list[str]) -> list[str]:
    """The user's overrides a member runs with: less ``pbt*`` and what the controller sets itself."""

    def key(o: str) -> str:
        return o.split("=", 1)[0].lstrip("+~")

    return [o for o in overrides if key(o) != "pbt" and not key(o).startswith(("pbt.", "hydra."))
            and key(o) not in OWNED]


def value_overrides(values: dict[str, Any]) -> list[str]:
    """``train.<key>=<value>`` overrides (repr: a float goes through Hydra exactly)."""
    return [f"{k}={v!r}" for k, v in values.items() if v is not None]


def with_values(cfg: Config, values: dict[str, Any]) -> Config:
    """A member's Config: the run's, without ``pbt``, with ``values`` set on their dotted keys."""
    out = replace(copy.deepcopy(cfg), pbt=None)
    for dotted, value in values.items():
        *parents, leaf = dotted.split(".")
        node: Any = out
        for p in parents:
            node = getattr(node, p)
        setattr(node, leaf, value)
    return out


def checkpoint_at(life_dir: Path, epoch: int) -> Path | None:
    """The periodic checkpoint rl-games wrote at ``epoch`` in a life's ``nn/`` (``last_<name>_ep_<epoch>_...``)."""
    for p in sorted(life_dir.glob("rl_games/*/nn/last_*.pth")):
        m = EPOCH_IN_NAME.search(p.name)
        if m and int(m.group(1)) == epoch:
            return p
    return None


@dataclass
class Life:
    """One start of a member: its run dir, its job, its values, where it started (frames, epoch) and from what."""

    member: int
    index: int
    values: dict[str, Any]
    job: Job
    started_frames: int = 0
    seen: int = 0  # history records read
    best: float | None = None  # the best objective within the current interval (DexPBT's)


@dataclass
class InPlace:
    """An in-place exploit posted to a member and not yet acknowledged."""

    control: exploit.Control
    life: Life
    decided: float  # time.time() of the decision
    frames: int  # the member's frames at the interval decided on (what it trains past them is thrown away)


@dataclass
class Population:
    """The controller: the run's config, its members' lives, the records and the state file."""

    cfg: Config
    run_dir: Path
    overrides: list[str]
    poll_s: float = 0.3
    grace_s: float = 20.0
    epochs_per_interval: int = 1
    frames_per_epoch: int = 0
    lives: dict[int, Life] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    checkpoints: dict[tuple[int, int], Path] = field(default_factory=dict)  # (member, interval) -> its checkpoint
    values_at: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)  # (member, interval) -> values
    pool: list[slots.Slot] = field(default_factory=list)
    member_of: slots.Member | None = None
    per_gpu: int = 1
    gpus: list[int] = field(default_factory=list)
    exploits: int = 0
    pending: list[tuple[Life, int, int]] = field(default_factory=list)  # (life, interval, frames) to decide
    tag: str = ""  # pbt.exploit=inplace: the run tag of the members' published states (the controller's pid)
    segments: dict[tuple[int, int], str] = field(default_factory=dict)  # (member, interval) -> its published state
    in_place: dict[int, InPlace] = field(default_factory=dict)  # member -> its exploit not yet acknowledged
    verdicts: int = 0  # pbt.exploit=inplace: verdicts sent (each member waits for one at every interval's end)

    @property
    def pbt_dir(self) -> Path:
        return self.run_dir / "pbt"

    @property
    def inplace(self) -> bool:
        """``pbt.exploit=inplace``: members publish their state, an underperformer takes a leader's without a stop."""
        return self.cfg.pbt is not None and self.cfg.pbt.exploit == "inplace"

    @property
    def rules(self) -> Rules:
        p = self.cfg.pbt
        assert p is not None
        return Rules(population=p.population, threshold_std=p.threshold_std, threshold_abs=p.threshold_abs,
                     replace_fraction_worst=p.replace_fraction_worst, replace_fraction_best=p.replace_fraction_best,
                     replace_threshold_frac_std=p.replace_threshold_frac_std,
                     replace_threshold_frac_absolute=p.replace_threshold_frac_absolute,
                     leader_params_prob=p.leader_params_prob, start_after=p.start_after,
                     initial_delay=p.initial_delay)

    def check(self) -> list[dict[str, Any]]:
        """Every member's config planned on its slot (exit 2 before any start); the interval in epochs."""
        refuse_unbuilt(self.cfg)
        p = self.cfg.pbt
        assert p is not None
        if (self.run_dir / "members").exists() or (self.pbt_dir / STATE).exists():
            raise ConfigError(f"invalid run dir {self.run_dir} for pbt: it holds a population already and resuming "
                              "one is not built yet; valid: a new run dir (hydra.run.dir=...)")
        hw = resolve(self.cfg.hardware.name)
        if hw.is_preset:
            raise ConfigError(f"invalid hardware={self.cfg.hardware.name} for a pbt run: presets only plan; valid: "
                              "auto, cpu")
        self.gpus = slots.choose_gpus(hw, None)
        self.per_gpu = math.ceil(p.population / len(self.gpus))  # every member at once: they compare at intervals
        self.pool = slots.make_slots(hw, self.gpus, self.per_gpu)
        backend = next((o.split("=", 1)[1] for o in reversed(self.overrides) if o.startswith("backend=")), None)
        self.member_of = slots.Member(backend, self.cfg.gmis_per_gpu)
        self._hw = hw
        values = starting_values(self.cfg)
        for m, v in enumerate(values):
            plan, _ = build_plan(with_values(self.cfg, v), self.member_dir(m, 0), hardware=copy.deepcopy(hw))
            if plan.role != "ppo" or plan.layout != "tcg_ex":
                refuse_unbuilt(replace(self.cfg, role=plan.role))  # train=rslrl sets its role in the plan
            if m == 0:
                self.frames_per_epoch = sum(g.num_envs for g in plan.gmis) * plan.train.horizon_length
        self.epochs_per_interval = max(1, round(p.interval_steps / self.frames_per_epoch))
        return values

    def member_dir(self, member: int, life: int) -> Path:
        return self.run_dir / "members" / str(member) / f"life{life}"

    def log(self, event: str, **fields: Any) -> None:
        """Append one event to ``<run>/pbt/state.jsonl`` (the lineage)."""
        self.pbt_dir.mkdir(parents=True, exist_ok=True)
        with (self.pbt_dir / STATE).open("a") as f:
            f.write(json.dumps({"event": event, "time": time.time(), **fields}, default=str) + "\n")

    def start(self, member: int, values: dict[str, Any], slot: slots.Slot, source: Path | None = None,
              started_frames: int = 0, source_values: dict[str, Any] | None = None) -> Life:
        """Start the member's next life on ``slot`` (from ``source``'s checkpoint, copied into it, when given).

        The copy keeps the source's learning, not its streams, nor the schedule of a value the member changed
        (``source_values``: the source's; :func:`gmiexp.rl.rlgames.checkpoint.for_another_run`).
        """
        index = self.lives[member].index + 1 if member in self.lives else 0
        run_dir = self.member_dir(member, index)
        # member m's own seed, as the anchors' processes each draw their own: a population of one seed would step
        # the same episodes; a restart keeps the member's seed and takes its source's learning, not its streams
        extra = [f"train.save_frequency={self.epochs_per_interval}", f"seed={member_seed(self.cfg.seed, member)}"]
        if self.cfg.logger.name == "wandb":  # one W&B group per population, a run per member's life
            extra += [f"logger.group={views.wandb_group(self.cfg.logger.group, self.run_dir)}",
                      f"logger.tags={json.dumps([*self.cfg.logger.tags, f'pbt:member{member}'])}"]
        if source is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
            start = run_dir / "start.pth"
            changed = [k.split(".", 1)[1] for k, v in values.items()
                       if k.startswith("train.") and (source_values or {}).get(k) != v]
            torch.save(for_another_run(torch.load(source, map_location="cpu", weights_only=False), changed), start)
            if (source.parent / RECORD).is_file():  # the policy record (task, params) the checkpoint came with
                shutil.copyfile(source.parent / RECORD, run_dir / RECORD)
            extra += [f"checkpoint={start}", "launch.resume=never"]
        if self.inplace:  # its GMIs publish their state under the controller's tag (gmiexp.rl.exploit)
            run_dir.mkdir(parents=True, exist_ok=True)
            exploit.write_member(run_dir, exploit.MemberSpec(self.tag, member, self.epochs_per_interval, os.getpid()))
        assert self.member_of is not None
        job = Job(member, [*member_overrides(self.overrides), *value_overrides(values), *extra], run_dir,
                  slot_overrides=lambda s: slots.slot_overrides(s, self.member_of, self.per_gpu))  # type: ignore[arg-type]
        runner.start(job, slot, [])
        life = self.lives[member] = Life(member, index, dict(values), job, started_frames)
        self.log("start", member=member, life=index, values=values, slot=slot.name, run_dir=str(run_dir),
                 checkpoint=str(source) if source else None, frames=started_frames)
        say(f"pbt: member {member} life {index} on {slot.name}" + (f" from {source}" if source else ""))
        return life

    def shared_daemons(self) -> AbstractContextManager[None]:
        """An MPS GPU's one shared daemon for the whole population (as the pack launcher holds it for a sweep)."""
        assert self.member_of is not None
        gpus = slots.mps_gpus(self._hw, self.gpus, [self.member_of])
        if not gpus:
            return nullcontext()
        return mps_session.running([mps_daemon.shared_daemon(visible_device(self._hw, g)) for g in gpus])

    def run(self) -> dict[str, Any]:
        """Run the population to every member's ``max_iterations``; its summary. Ctrl-C/SIGTERM stop every member."""
        values = self.check()
        p = self.cfg.pbt
        assert p is not None
        self.tag = launcher_tag() if self.inplace else ""  # names this pid: a later launcher sweeps it if killed
        self.log("population", population=p.population, rule=p.replace_rule, exploit=p.exploit, tag=self.tag,
                 interval_steps=p.interval_steps, epochs_per_interval=self.epochs_per_interval,
                 frames_per_epoch=self.frames_per_epoch, mutation=dict(p.mutation))
        say(f"pbt: {p.population} members, {self.per_gpu} per GPU on GPUs {self.gpus}; every "
            f"{self.epochs_per_interval} epochs ({self.epochs_per_interval * self.frames_per_epoch} env steps), "
            f"rule {p.replace_rule}, exploit {p.exploit}; state {self.pbt_dir / STATE}")
        started = time.monotonic()
        with sigterm_raises(lambda signum: KeyboardInterrupt(f"signal {signum}")), self.shared_daemons():
            try:
                for m, v in enumerate(values):
                    self.start(m, v, self.pool[m])
                self.loop()
            except BaseException:
                self.stop_all()
                self.log("stopped", reason="interrupted or failed")
                self.views()
                raise
            finally:
                if self.tag:
                    cleanup_run(self.tag)  # every published state, whatever a member left
        summary = self.finish(time.monotonic() - started)
        self.views()
        return summary

    def views(self) -> None:
        """TensorBoard's ``pbt/*`` per member and, with W&B, the population's own run (:mod:`gmiexp.pbt.views`)."""
        try:
            views.write_tensorboard(self.run_dir)
            lg = self.cfg.logger
            if lg.name == "wandb" and lg.mode != "disabled":
                views.log_wandb(self.run_dir, lg.project, lg.entity, lg.mode, views.wandb_group(lg.group, self.run_dir))
        except Exception as e:  # the population's outcome stands without its views
            say(f"pbt: warning: the population's views were not written: {type(e).__name__}: {e}")

    def running(self) -> list[Life]:
        return [life for life in self.lives.values() if life.job.returncode is None]

    def stop_all(self) -> None:
        runner.stop([life.job for life in self.running()], self.grace_s)

    def loop(self) -> None:
        while self.running():
            time.sleep(self.poll_s)
            self.collect_acks()
            for life in list(self.running()):
                code = life.job.proc.poll() if life.job.proc is not None else None
                self.read(life, ended=code is not None)
                if code is not None:
                    runner.finish(life.job, code)
                    if code != 0:
                        err = (life.job.run_dir / runner.STDERR).read_text().strip().splitlines()[-5:]
                        raise LaunchError(f"pbt member {life.member} failed (exit {code}): {life.job.run_dir}\n  "
                                          + "\n  ".join(err))
            self.decide_pending()
            self.drop_segments()

    def read(self, life: Life, ended: bool) -> None:
        """Post the life's new interval records (the epochs that end an interval, once their checkpoint is written)."""
        history = read_history(life.job.run_dir)
        while life.seen < len(history):
            rec = history[life.seen]
            objective = rec.get(OBJECTIVE)
            if isinstance(objective, (int, float)) and math.isfinite(objective):
                life.best = objective if life.best is None else max(life.best, objective)
            epoch = int(rec["iteration"])
            if epoch % self.epochs_per_interval == 0:
                ckpt = checkpoint_at(life.job.run_dir, epoch)
                ready = (exploit.published(self.segment(life.member, epoch // self.epochs_per_interval))
                         if self.inplace else ckpt is not None)
                later = life.seen + 1 < len(history) or ended
                if not ready and not later:
                    return  # rl-games writes the checkpoint (its GMI 0 its state) just after the record: next poll
                self.post(life, epoch, int(rec["frames"]), objective, ckpt)
            life.seen += 1

    def post(self, life: Life, epoch: int, frames: int, objective: Any, ckpt: Path | None) -> None:
        p = self.cfg.pbt
        assert p is not None
        interval = epoch // self.epochs_per_interval
        known = objective if isinstance(objective, (int, float)) and math.isfinite(objective) else None
        record = Record(life.member, interval, frames, known, life.best)
        life.best = None
        self.records.append(record)
        if ckpt is not None:
            self.checkpoints[(life.member, interval)] = ckpt
        if self.inplace and exploit.published(self.segment(life.member, interval)):
            self.segments[(life.member, interval)] = self.segment(life.member, interval)
        self.values_at[(life.member, interval)] = dict(life.values)
        self.log("record", member=life.member, life=life.index, interval=interval, epoch=epoch, frames=frames,
                 objective=known, best=record.best, checkpoint=str(ckpt) if ckpt else None)
        if epoch < self.cfg.max_iterations:  # at its last epoch nothing is left to train
            self.pending.append((life, interval, frames))

    def complete(self, interval: int) -> bool:
        """Every member has posted ``interval`` (one of its lives): the table there is the whole population's."""
        assert self.cfg.pbt is not None
        return {r.member for r in self.records if r.iteration == interval} >= set(range(self.cfg.pbt.population))

    def decide_pending(self) -> None:
        """Decide each posted record whose interval every member has reached, in the order posted.

        Waiting for the whole population makes a decision depend on the objectives only, not on which member's
        epoch ended first: a population repeats from its seed. The member trains on meanwhile; an exploit loses
        what it trained since (as the anchors' restart does).
        """
        for item in list(self.pending):
            life, interval, frames = item
            if not self.complete(interval):
                continue
            self.pending.remove(item)
            if self.lives[life.member] is not life or life.job.returncode is not None:
                continue  # restarted or finished meanwhile
            if not self.decide(life, interval, frames) and self.inplace:  # it waits for the verdict: go on
                self.verdicts += 1
                exploit.post_control(life.job.run_dir, exploit.go_on(interval, self.verdicts))

    def decide(self, life: Life, interval: int, frames: int) -> bool:
        """Whether the member copies or mutates (and was sent its verdict, or restarted)."""
        p = self.cfg.pbt
        assert p is not None
        if life.member in self.in_place:  # its last verdict is not taken yet (a member that ended waits no more)
            self.log("decision", member=life.member, interval=interval, done="kept: an exploit in place is pending")
            return False
        table = table_at(self.records, p.population, interval)
        rng = member_rng(self.cfg.seed, life.member, interval)
        d = decide(p.replace_rule, table, life.member, self.rules, rng, started_at=life.started_frames)
        if not d.mutates:
            return False
        source = table[d.source]
        assert source is not None
        ckpt_from = self.checkpoints.get((d.source, source.iteration))
        segment = self.segments.get((d.source, source.iteration))
        if (segment if self.inplace else ckpt_from) is None:
            self.log("decision", member=life.member, interval=interval, source=d.source, reason=d.reason,
                     done=f"kept: the source has no {'published state' if self.inplace else 'checkpoint'} of that "
                          "interval")
            return False
        own = dict(life.values)
        source_values = self.values_at[(d.source, source.iteration)]
        taken = start_values(p.replace_rule, own, source_values, self.rules, rng)
        bounds = {k: (PBT_KEYS[k].lo, PBT_KEYS[k].hi) for k in taken if k in PBT_KEYS}
        new = mutate(taken, p.mutation, p.mutation_rate, (p.change_range[0], p.change_range[1]), rng, bounds)
        self.exploits += 1
        self.verdicts += 1
        self.log("decision", member=life.member, interval=interval, frames=frames, source=d.source,
                 source_interval=source.iteration, source_frames=source.frames, reason=d.reason, copies=d.copies,
                 values_before=own, values_taken=taken, values=new, exploit=p.exploit,
                 **({"segment": segment, "id": self.verdicts} if self.inplace else {"checkpoint": str(ckpt_from)}))
        if self.inplace:
            assert segment is not None
            control = exploit.Control(self.verdicts, d.source, source.iteration, segment, new, dict(source_values))
            exploit.post_control(life.job.run_dir, control)
            self.in_place[life.member] = InPlace(control, life, time.time(), frames)
            life.started_frames = source.frames  # DexPBT's grace counts from the exploit
            say(f"pbt: member {life.member} at interval {interval}: {d.reason}; takes member {d.source}'s state "
                f"({source.frames} frames) in place with {value_overrides(new)}")
            return True
        say(f"pbt: member {life.member} at interval {interval}: {d.reason}; restarts from member {d.source}'s "
            f"checkpoint ({source.frames} frames) with {value_overrides(new)}")
        slot = life.job.slot
        assert slot is not None
        runner.stop([life.job], self.grace_s)
        self.start(life.member, new, slot, source=ckpt_from, started_frames=source.frames,
                   source_values=source_values)
        return True

    def segment(self, member: int, interval: int) -> str:
        return exploit.state_segment(self.tag, member, interval)

    def collect_acks(self) -> None:
        """Record each in-place exploit its member has taken (or ended without taking) in the lineage."""
        for member, pending in list(self.in_place.items()):
            life, control = pending.life, pending.control
            ack = next((a for a in exploit.acks(life.job.run_dir) if a.get("id") == control.id), None)
            if ack is None:
                if life.job.returncode is not None or (life.job.proc is not None and life.job.proc.poll() is not None):
                    del self.in_place[member]
                    self.log("exploited", member=member, life=life.index, id=control.id, source=control.source,
                             interval=control.interval, done="not taken: the member ended first")
                continue
            del self.in_place[member]
            if "error" in ack:
                self.log("exploited", member=member, life=life.index, id=control.id, done=ack["error"])
                continue
            life.values = dict(control.values)
            self.log("exploited", member=member, life=life.index, id=control.id, source=control.source,
                     interval=control.interval, segment=control.segment, values=control.values, epoch=ack["epoch"],
                     frames=ack["frames"], frames_lost=int(ack["frames"]) - pending.frames,
                     seconds=float(ack["time"]) - pending.decided, load_s=ack.get("load_s"), pid=ack.get("pid"),
                     sha256=ack.get("sha256"), last_lr=ack.get("last_lr"))
            say(f"pbt: member {member} took member {control.source}'s state of interval {control.interval} in place "
                f"at its epoch {ack['epoch']} ({float(ack['time']) - pending.decided:.2f}s after the decision)")

    def drop_segments(self) -> None:
        """Unlink the published states no decision or pending exploit can still ask for (intervals decided)."""
        waiting = {interval for _, interval, _ in self.pending} | {e.control.interval for e in self.in_place.values()}
        for key in [k for k in self.segments if self.complete(k[1]) and k[1] not in waiting]:
            exploit.drop(self.segments.pop(key))

    def finish(self, wall_s: float) -> dict[str, Any]:
        """The best member by its last objective; its last checkpoint and policy record into ``<run>/pbt/best/``."""
        members = []
        for m, life in sorted(self.lives.items()):
            hist = read_history(life.job.run_dir)
            ret = hist[-1].get(OBJECTIVE) if hist else None
            members.append({"member": m, "lives": life.index + 1, "return": ret, "values": life.values,
                            "run_dir": str(life.job.run_dir)})
        scored = [x for x in members if isinstance(x["return"], (int, float)) and math.isfinite(x["return"])]
        summary: dict[str, Any] = {"status": "ok", "run_dir": str(self.run_dir), "wall_s": wall_s,
                                   "exploits": self.exploits, "members": members}
        if scored:
            best = max(scored, key=lambda x: x["return"])
            found = latest_checkpoint(next(Path(best["run_dir"]).glob("rl_games/*/nn")))
            if found is not None:
                dest = self.pbt_dir / "best"
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(found[0], dest / found[0].name)
                shutil.copyfile(found[0].parent / RECORD, dest / RECORD)
                summary["best"] = {"member": best["member"], "return": best["return"],
                                   "checkpoint": str(dest / found[0].name)}
            summary["metrics"] = {OBJECTIVE: best["return"]}
        self.log("finished", **{k: v for k, v in summary.items() if k != "members"})
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        return summary


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_population(cfg: Config, run_dir: Path, overrides: list[str]) -> dict[str, Any]:
    """``mode=train`` with ``pbt``: run the population (exit 2 before any start for what is not built)."""
    summary = Population(cfg, run_dir, overrides).run()
    best = summary.get("best")
    print(f"gmiexp pbt ok: {len(summary['members'])} members, {summary['exploits']} exploits, wall "
          f"{summary['wall_s']:.1f}s" + (f" | best member {best['member']} return {best['return']:.4g}: "
                                         f"{best['checkpoint']}" if best else "") + f" | {run_dir}", flush=True)
    return summary

