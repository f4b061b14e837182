"""The population controller: members as packed runs, the exploit in place or by the anchors' restart, lineage.

``python -m gmiexp pbt=...`` runs each member as a normal gmiexp run (rl-games' PPO or rsl_rl's, tcg_ex: what
differs between them is in :mod:`gmiexp.pbt.trainers`) in its own process
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
controller's side of that exchange, the segments, verdicts, acknowledgements and relays between nodes, is
:mod:`gmiexp.pbt.exchange`. A member's overrides and lives are in :mod:`gmiexp.pbt.members`, where its checkpoints
lie in :mod:`gmiexp.pbt.trainers`.

Everything that happened goes to ``<run>/pbt/state.jsonl`` (starts, records, decisions with the values taken, the
in-place exploits taken); at the end the best member's last checkpoint is copied with its policy record into
``<run>/pbt/best/``, which ``mode=eval checkpoint=...`` plays. On several nodes the controller runs on node 0 and
reaches the members of the others through their agents (:mod:`gmiexp.pbt.nodes`).

The population is one job. Ctrl-C or SIGTERM (a Slurm requeue) stops every member, each keeping its last checkpoint,
and the log keeps the controller's state. The same command in the same run dir (``launch.resume=auto``, as for a
plain run; ``never`` exits 2 there) replays the log (:func:`gmiexp.pbt.state.replay`: records, checkpoints, values,
counters) and starts each member's next life from its own last checkpoint with its current values (``checkpoint=``,
taken whole: its run goes on), or from the leader's checkpoint of a restart exploit decided just before the stop.
A member that exits non-zero when the controller did not stop it is restarted from its last checkpoint or, with
none or failing again from it, replaced by a copy of a leader's (a ``decision`` with reason ``failed``); past
``pbt.max_failures`` failures in one run the population stops, exit 1, naming each failed member and its run dir.
A member that exits 2 refused its input (bad input only its GMIs see): the population stops with exit 2, naming it.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from gmiexp.config import Config
from gmiexp.config.schema import PBT_KEYS
from gmiexp.errors import REFUSAL_PREFIX, REFUSED_EXIT_CODE, ConfigError, LaunchError, RefusedInGmi
from gmiexp.launch.requeue import training_key
from gmiexp.pack import runner, slots
from gmiexp.pack.runner import Job
from gmiexp.pbt import nodes, views
from gmiexp.pbt.exchange import Exchange
from gmiexp.pbt.members import (
    OBJECTIVE,
    ONE_NODE,
    Life,
    member_overrides,
    objective_column,
    objective_overrides,
    per_node,
    refuse_unbuilt,
    starting_values,
    value_overrides,
    with_values,
)
from gmiexp.pbt.members import place as place_members
from gmiexp.pbt.mutation import mutate
from gmiexp.pbt.nodes import say
from gmiexp.pbt.placement import Placement, check_space_here, member_config, placement
from gmiexp.pbt.rules import Record, Rules, decide, member_rng, member_seed, start_values, table_at
from gmiexp.pbt.state import STATE_FILE, MemberState, Replayed, refuse_never, resumable, rewind
from gmiexp.pbt.trainers import checkpoint_at, copy_for_another_run, last_checkpoint, life_checkpoint, member_training
from gmiexp.planner.build import build_plan
from gmiexp.planner.nodes import resolve_nodes
from gmiexp.rl import exploit
from gmiexp.rl.rlgames.record import RECORD
from gmiexp.signals import sigterm_raises
from gmiexp.status import append_jsonl, read_history


@dataclass
class Population:
    """The controller: the run's config, its members' lives, the records and the state file."""

    cfg: Config
    run_dir: Path
    overrides: list[str]
    poll_s: float = 0.3
    grace_s: float = nodes.STOP_GRACE_S
    epochs_per_interval: int = 1
    frames_per_epoch: int = 0
    lives: dict[int, Life] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    checkpoints: dict[tuple[int, int], Path] = field(default_factory=dict)  # (member, interval) -> its checkpoint
    values_at: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)  # (member, interval) -> values
    pool: list[slots.Slot] = field(default_factory=list)  # each member's slot (on its node: ``where``)
    place: Placement | None = None  # this node's slots
    where: list[tuple[int, int]] = field(default_factory=list)  # each member's (node, slot index there)
    link: nodes.Link | None = None  # several nodes: node 0's side of the agents (gmiexp.pbt.nodes)
    exchange: Exchange | None = None  # pbt.exploit=inplace: the states published and the verdicts posted
    exploits: int = 0
    pending: list[tuple[Life, int, int]] = field(default_factory=list)  # (life, interval, frames) to decide
    key: str = ""  # what the members' checkpoints' numbers depend on (launch.requeue.training_key of member 0's)
    previous: Replayed | None = None  # the population this run dir holds, that this run goes on with
    first_life: dict[int, int] = field(default_factory=dict)  # member -> its next life's index (a resume's)
    failures: list[dict[str, Any]] = field(default_factory=list)  # members' failures in this run (pbt.max_failures)

    @property
    def pbt_dir(self) -> Path:
        return self.run_dir / "pbt"

    @property
    def tag(self) -> str:
        """The run tag the members' states go under on node 0 (the controller's pid), "" for restart exploits."""
        return self.exchange.tag if self.exchange is not None else ""

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
        refuse_never(self.run_dir, self.cfg.launch.resume)
        self.place = place = placement(self.cfg, self.overrides)
        self.where = place_members(p.population, int(self.cfg.launch.nnodes))
        self.pool = [place.pool[i] for _, i in self.where]
        values = starting_values(self.cfg)
        # as its process will compose it, on this node's slot of least memory (as the pack launcher checks a sweep's)
        on_slot = member_config(self.cfg, self.overrides, place.overrides(slots.tightest(place.hw, place.pool)), 0, {})
        node, here, labels = int(self.cfg.launch.node_rank or 0), [], []
        for m, v in enumerate(values):
            member = replace(with_values(on_slot, v), seed=member_seed(self.cfg.seed, m))
            plan, _ = build_plan(member, self.member_dir(m, 0), hardware=copy.deepcopy(place.hw))
            if plan.role != "ppo" or plan.layout != "tcg_ex":
                refuse_unbuilt(replace(self.cfg, role=plan.role))  # train=rslrl sets its role in the plan
            if m == 0:
                self.frames_per_epoch, values = member_training(self.cfg, plan, values)  # rsl_rl: its recipe's
                self.key = training_key(plan)
            if self.where[m][0] == node:
                here.append(plan)
                labels.append(f"member {m}")
        check_space_here(self.cfg, here, self.run_dir, place, labels)
        self.epochs_per_interval = max(1, round(p.interval_steps / self.frames_per_epoch))
        here = {"population": p.population, "epochs_per_interval": self.epochs_per_interval,
                "frames_per_epoch": self.frames_per_epoch, "key": self.key}
        self.previous = resumable(self.run_dir, here, self.cfg.max_iterations)
        return values

    def member_dir(self, member: int, life: int) -> Path:
        return self.run_dir / "members" / str(member) / f"life{life}"

    def log(self, event: str, **fields: Any) -> None:
        """Append one event to ``<run>/pbt/state.jsonl`` (the lineage)."""
        self.pbt_dir.mkdir(parents=True, exist_ok=True)
        append_jsonl(self.run_dir / STATE_FILE, {"event": event, "time": time.time(), **fields}, default=str)

    def start(self, member: int, values: dict[str, Any], slot: slots.Slot, source: Path | None = None,
              started_frames: int = 0, source_values: dict[str, Any] | None = None, *, own: bool = False,
              cause: str | None = None, frames: int | None = None, source_interval: int | None = None) -> Life:
        """Start the member's next life on ``slot`` (from ``source``'s checkpoint, copied into it, when given).

        The copy keeps the source's learning, not its streams, nor the schedule of a value the member changed
        (``source_values``: the source's; :func:`gmiexp.rl.rlgames.checkpoint.for_another_run`). ``own``: the
        member's own checkpoint, taken whole (its run goes on: its generators, simulator and episodes too), after a
        stop or a failure; its records past it are trained again. ``started_frames``: where DexPBT's grace counts
        from; ``frames``: the frames the life starts at, when they differ (a resume keeps the grace it had).
        """
        index = self.lives[member].index + 1 if member in self.lives else self.first_life.get(member, 0)
        cause = cause or ("exploit" if source is not None else "new")
        frames = started_frames if frames is None else frames
        run_dir = self.member_dir(member, index)
        # member m's own seed, as the anchors' processes each draw their own: a population of one seed would step
        # the same episodes; a restart keeps the member's seed and takes its source's learning, not its streams
        extra = [f"train.save_frequency={self.epochs_per_interval}", f"seed={member_seed(self.cfg.seed, member)}",
                 *objective_overrides(self.cfg.pbt.objective)]
        if self.cfg.logger.name == "wandb":  # one W&B group per population, a run per member's life
            extra += [f"logger.group={views.wandb_group(self.cfg.logger.group, self.run_dir)}",
                      f"logger.tags={json.dumps([*self.cfg.logger.tags, f'pbt:member{member}'])}"]
        if source is not None and own:
            extra += [f"checkpoint={source}", "launch.resume=never"]
        elif source is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
            start = run_dir / "start.pth"
            copy_for_another_run(source, start, values, source_values or {})
            if (source.parent / RECORD).is_file():  # the policy record (task, params) the checkpoint came with
                shutil.copyfile(source.parent / RECORD, run_dir / RECORD)
            extra += [f"checkpoint={start}", "launch.resume=never"]
        node = self.node_of(member)
        if int(self.cfg.launch.nnodes) > 1:  # not the scheduler's: a Slurm step of N nodes would refuse a run of one
            extra += ONE_NODE
        if self.exchange is not None:  # its GMIs publish their state under its node's tag (gmiexp.rl.exploit)
            run_dir.mkdir(parents=True, exist_ok=True)
            exploit.write_member(run_dir, self.exchange.spec(member, self.epochs_per_interval))
        assert self.place is not None
        job = Job(member, [*member_overrides(self.overrides), *value_overrides(values), *extra], run_dir,
                  slot_overrides=self.place.overrides)
        if node:  # its node's agent starts it on the slot of that index there
            assert self.link is not None
            run_dir.mkdir(parents=True, exist_ok=True)
            job.slot, job.start, job.status = slot, time.time(), "running"
            self.link.send(node, "start", member=member, life=index, overrides=job.overrides, run_dir=str(run_dir),
                           slot=self.where[member][1])
        else:
            runner.start(job, slot, [])
        copy = source is not None and not own
        # it trains again what it trained past its checkpoint, or past the source's interval
        rewind(self.records, self.checkpoints, member, copy=copy, cause=cause, frames=frames,
               source_interval=source_interval)
        life = self.lives[member] = Life(member, index, dict(values), job, started_frames, source=source,
                                         cause=cause, copy=copy)
        self.log("start", member=member, life=index, values=values, slot=slot.name, node=node, run_dir=str(run_dir),
                 checkpoint=str(source) if source else None, frames=frames, grace_frames=started_frames,
                 cause=cause, copy=copy, **({"source_interval": source_interval} if copy else {}))
        say(f"pbt: member {member} life {index} on {f'node {node} ' if self.link else ''}{slot.name}"
            + (f" from {source}" if source else ""))
        return life

    def node_of(self, member: int) -> int:
        return self.where[member][0] if self.where else 0

    def run(self) -> dict[str, Any]:
        """Run the population to every member's ``max_iterations``; its summary. Ctrl-C/SIGTERM stop every member."""
        values = self.check()
        p = self.cfg.pbt
        assert p is not None
        nnodes = int(self.cfg.launch.nnodes)
        code = 1
        try:
            if nnodes > 1:  # every other node's agent, meeting at node 0's store (gmiexp.pbt.nodes)
                self.meet()
            if self.inplace:
                self.exchange = Exchange(self.node_of, self.log, self.link)
            summary = self.train(values, nnodes)
            code = 0
            return summary
        except KeyboardInterrupt:
            code = 130
            raise
        finally:
            if self.link is not None:
                self.link.end(code)  # every agent stops what is left of its members and exits with the code

    def meet(self) -> None:
        """Serve the store and wait for every node's agent (exit 2, leaving nothing, for a run dir not shared)."""
        fresh = not self.pbt_dir.exists()
        self.link = nodes.Link.host(self.cfg, self.run_dir)
        try:
            agents = self.link.meet(self.run_dir, self.overrides)
        except ConfigError:
            self.link = None
            if fresh:
                shutil.rmtree(self.pbt_dir, ignore_errors=True)
            raise
        say(f"pbt: nodes {', '.join(f'{r} ({a.host}, pid {a.pid})' for r, a in agents.items())} serve their "
            f"members ({per_node(len(self.where), int(self.cfg.launch.nnodes))} per node)")

    def train(self, values: list[dict[str, Any]], nnodes: int) -> dict[str, Any]:
        p = self.cfg.pbt
        assert p is not None and self.place is not None
        if self.previous is None:
            self.log("population", population=p.population, rule=p.replace_rule, exploit=p.exploit, tag=self.tag,
                     interval_steps=p.interval_steps, epochs_per_interval=self.epochs_per_interval,
                     frames_per_epoch=self.frames_per_epoch, mutation=dict(p.mutation), key=self.key,
                     max_iterations=self.cfg.max_iterations, nnodes=nnodes)
        else:
            self.restore(self.previous)
        if self.link is not None:  # who serves which members this start, and the tags their states go under
            self.log("nodes", nnodes=nnodes, tag=self.tag, agents=[asdict(a) for a in self.link.agents.values()],
                     members={m: n for m, (n, _) in enumerate(self.where)})
        say(f"pbt: {p.population} members, {self.place.per_gpu} per GPU on GPUs {self.place.gpus}"
            + (f" of each of {nnodes} nodes" if nnodes > 1 else "") + f"; every "
            f"{self.epochs_per_interval} epochs ({self.epochs_per_interval * self.frames_per_epoch} env steps), "
            f"rule {p.replace_rule}, exploit {p.exploit}; state {self.run_dir / STATE_FILE}")
        started = time.monotonic()
        with sigterm_raises(lambda signum: KeyboardInterrupt(f"signal {signum}")), self.place.shared_daemons():
            try:
                if self.previous is None:
                    for m, v in enumerate(values):
                        self.start(m, v, self.pool[m])
                else:
                    self.resume_members(values)
                self.loop()
            except BaseException as e:
                self.stop_all()
                self.collect_acks()  # what a member took before it stopped is its state now
                self.read_all()  # the records up to the stop: a resume goes on from them
                self.log("stopped", reason="failed" if isinstance(e, (LaunchError, RefusedInGmi)) else "interrupted")
                self.views()
                raise
            finally:
                if self.exchange is not None:
                    self.exchange.close()  # every published state, whatever a member left
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
        self.stop(self.running())

    def stop(self, lives: list[Life]) -> None:
        """SIGINT each life's group (its node's agent does it there), SIGKILL what is left after the grace."""
        runner.stop([life.job for life in lives if not self.node_of(life.member)], self.grace_s)
        remote: dict[int, list[tuple[int, int]]] = {}
        for life in lives:
            if self.node_of(life.member):
                remote.setdefault(self.node_of(life.member), []).append((life.member, life.index))
        if remote and self.link is not None:
            codes = self.link.stop(remote, self.grace_s)
            for life in lives:
                if (life.member, life.index) in codes:
                    runner.finish(life.job, codes[(life.member, life.index)])
                    life.job.status = "interrupted"

    def poll(self, life: Life) -> int | None:
        """The life's exit code once it ended (its node's agent posts it), else None."""
        if self.node_of(life.member) and self.link is not None:
            return self.link.exit_code(life.member, life.index)
        return life.job.proc.poll() if life.job.proc is not None else None

    def loop(self) -> None:
        while self.running():
            arriving = self.exchange is not None and self.exchange.arriving
            time.sleep(nodes.POLL_S if arriving else self.poll_s)  # a relayed state on its way: soon
            if self.link is not None:
                self.link.check()  # an agent stopped on its own (a signal, an error) stops the population
            if self.exchange is not None:
                self.exchange.deliver()
            self.collect_acks()
            for life in list(self.running()):
                code = self.poll(life)
                if code not in (None, 0) and self.link is not None and self.node_of(life.member):
                    self.link.check()  # its agent's stop, not the member's failure
                self.read(life, ended=code is not None)
                if code is not None:
                    runner.finish(life.job, code)
                    if code != 0:  # not stopped by the controller: those lives are no longer polled
                        self.failed(life, code)
            self.decide_pending()
            if self.exchange is not None:
                self.exchange.drop_segments({interval for _, interval, _ in self.pending}, self.complete)

    # -- the population as one job: going on after a stop, a failed member restarted or replaced --

    def restore(self, prev: Replayed) -> None:
        """The controller's state from the log (:func:`gmiexp.pbt.state.replay`): records, checkpoints, counters."""
        self.records, self.checkpoints, self.values_at = list(prev.records), dict(prev.checkpoints), dict(
            prev.values_at)
        self.exploits = prev.exploits
        if self.exchange is not None:
            self.exchange.verdicts = prev.verdicts
        self.first_life = {m: ms.life + 1 for m, ms in prev.members.items()}

    def read_all(self) -> None:
        """Post what every member's current life wrote before it ended (a stop: each has ended)."""
        for life in self.lives.values():
            try:
                self.read(life, ended=True)
            except (OSError, ValueError) as e:  # the stop stands without them; the member trains them again
                say(f"pbt: member {life.member}'s records after the stop not read: {type(e).__name__}: {e}")

    def catch_up(self, ms: MemberState) -> None:
        """Post the records a member's last life wrote that the log lacks.

        The controller was killed before it read them: the others may wait for such an interval, which the member's
        next life starts past.
        """
        logged = max((r.frames for r in self.records if r.member == ms.member), default=-1)
        life = Life(ms.member, ms.life, dict(ms.values), Job(ms.member, [], ms.run_dir), ms.started_frames)
        life.seen = sum(1 for h in read_history(ms.run_dir) if int(h.get("frames", 0)) <= logged)
        self.read(life, ended=True)
        self.pending = [item for item in self.pending if item[0] is not life]  # it decides nothing: it ended

    def resume_members(self, values: list[dict[str, Any]]) -> None:
        """Every member's next life where the log leaves it.

        From its own last checkpoint with its current values, or from the leader's checkpoint of a restart exploit
        decided and not started before the stop.
        """
        prev = self.previous
        assert prev is not None and self.cfg.pbt is not None
        plans: dict[int, dict[str, Any]] = {}
        for m in range(self.cfg.pbt.population):
            ms = prev.members.get(m)
            if ms is None:  # stopped before it started
                plans[m] = {"values": values[m], "cause": "resume"}
                continue
            d = ms.unstarted
            if d is not None and d.get("checkpoint") and Path(d["checkpoint"]).is_file():
                source_values = self.values_at.get((d["source"], d["source_interval"]), {})
                plans[m] = {"values": d["values"], "source": Path(d["checkpoint"]), "source_values": source_values,
                            "started_frames": int(d["source_frames"]), "cause": "exploit",
                            "source_interval": int(d["source_interval"])}
                continue
            self.catch_up(ms)
            own = life_checkpoint(ms.run_dir, Path(ms.checkpoint) if ms.checkpoint else None, ms.copy)
            plans[m] = {"values": ms.values, "cause": "resume", "started_frames": ms.started_frames,
                        **({"source": own[0], "own": True, "frames": own[1] * self.frames_per_epoch} if own else
                           {"frames": 0})}
        at = {m: pl.get("frames", pl.get("started_frames", 0)) for m, pl in plans.items()}
        self.log("resumed", segment=prev.segments + 1, tag=self.tag, max_iterations=self.cfg.max_iterations,
                 frames=at, failures_before=len(prev.failures))
        say(f"pbt: going on with the population in {self.run_dir} (start {prev.segments + 1}): members from frames "
            + ", ".join(f"{m}: {f}" for m, f in at.items()))
        for m, pl in plans.items():
            self.start(m, pl.pop("values"), self.pool[m], **pl)

    def failed(self, life: Life, code: int) -> None:
        """A member exited non-zero: restart it, replace it, or stop the population.

        From its last checkpoint; by a leader's copy when it has none or failed again from it; past
        ``pbt.max_failures`` failures in this run the population stops (exit 1, naming every failure).
        """
        p = self.cfg.pbt
        assert p is not None and life.job.slot is not None
        m, slot = life.member, life.job.slot
        try:
            lines = (life.job.run_dir / runner.STDERR).read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        # its launcher's error line names the failure (a GMI's exception); its last lines are often the trainer's
        tail = lines[-5:]
        tail = [ln for ln in lines[:-5] if ln.startswith(REFUSAL_PREFIX)][-1:] + tail
        frames = max((r.frames for r in self.records if r.member == m), default=0)
        where = {"member": m, "life": life.index, "code": code, "run_dir": str(life.job.run_dir), "frames": frames,
                 "stderr": tail}
        if code == REFUSED_EXIT_CODE:  # bad input its GMIs saw: a restart or a leader's copy would refuse it again
            self.log("failed", **where, then="the population stops: the member refused its input (exit 2)")
            said = [ln.removeprefix(REFUSAL_PREFIX) for ln in tail if ln.startswith(REFUSAL_PREFIX)]
            raise RefusedInGmi(f"member {m}: {said[-1] if said else f'exit {code}'}; the population stopped "
                               f"(its run dir: {life.job.run_dir})")
        self.failures.append({"member": m, "life": life.index, "code": code, "run_dir": str(life.job.run_dir)})
        if len(self.failures) > p.max_failures:
            self.log("failed", **where, then=f"the population stops: {len(self.failures)} failures, past "
                                             f"pbt.max_failures={p.max_failures}")
            named = "\n  ".join(f"member {f['member']} life {f['life']} (exit {f['code']}): {f['run_dir']}"
                                for f in self.failures)
            raise LaunchError(f"pbt: {len(self.failures)} member failures, past pbt.max_failures={p.max_failures}; "
                              f"the population stopped (its state: {self.run_dir / STATE_FILE}):\n  {named}\n  last "
                              f"stderr of member {m}:\n    " + "\n    ".join(tail))
        own = life_checkpoint(life.job.run_dir, life.source, life.copy)
        again = own is not None and life.cause == "failed" and not life.copy and life.source == own[0]
        if own is not None and not again:
            self.log("failed", **where, then=f"restarts from its checkpoint {own[0]}")
            say(f"pbt: member {m} failed (exit {code}, {life.job.run_dir}); restarts from {own[0]}")
            self.start(m, life.values, slot, own[0], life.started_frames, own=True, cause="failed",
                       frames=own[1] * self.frames_per_epoch)
            return
        lead = self.leader(m)
        if lead is None:
            self.log("failed", **where, then="starts again from scratch: no checkpoint of its own or a leader's")
            say(f"pbt: member {m} failed (exit {code}, {life.job.run_dir}); starts again from scratch")
            self.start(m, life.values, slot, cause="failed")
            return
        rec, ckpt = lead
        self.log("failed", **where, then=f"replaced by member {rec.member}'s checkpoint {ckpt}")
        taken = self.values_at.get((rec.member, rec.iteration), dict(life.values))
        rng = member_rng(self.cfg.seed, m, rec.iteration)
        bounds = {k: (PBT_KEYS[k].lo, PBT_KEYS[k].hi) for k in taken if k in PBT_KEYS}
        new = mutate(taken, p.mutation, p.mutation_rate, (p.change_range[0], p.change_range[1]), rng, bounds)
        self.exploits += 1
        self.log("decision", member=m, interval=rec.iteration, frames=frames, source=rec.member,
                 source_interval=rec.iteration, source_frames=rec.frames, reason="failed", copies=True,
                 values_before=dict(life.values), values_taken=taken, values=new, exploit="restart",
                 checkpoint=str(ckpt))
        say(f"pbt: member {m} failed (exit {code}, {life.job.run_dir}) again from its checkpoint or has none; "
            f"takes member {rec.member}'s ({rec.frames} frames) with {value_overrides(new)}")
        self.start(m, new, slot, source=ckpt, started_frames=rec.frames, source_values=taken, cause="failed",
                   source_interval=rec.iteration)

    def leader(self, member: int) -> tuple[Record, Path] | None:
        """The other member of the best objective at the member's latest interval or before, with a checkpoint there.

        At equal or fewer frames, as an exploit compares: the member then posts every later interval itself, which
        the others (in place, waiting for the whole population's interval) need.
        """
        assert self.cfg.pbt is not None
        reached = max((r.iteration for r in self.records if r.member == member), default=0)
        table = table_at(self.records, self.cfg.pbt.population, reached)
        for rec in sorted((r for s, r in table.items() if s != member and r is not None and r.objective is not None),
                          key=lambda r: -float(r.objective or 0)):
            ckpt = self.checkpoints.get((rec.member, rec.iteration))
            if ckpt is None and rec.member in self.lives:  # in place: posted before its checkpoint was written
                ckpt = checkpoint_at(self.lives[rec.member].job.run_dir, rec.iteration * self.epochs_per_interval)
            if ckpt is not None and ckpt.is_file():
                return rec, ckpt
        return None

    def read(self, life: Life, ended: bool) -> None:
        """Post the life's new interval records (the epochs that end an interval, once their checkpoint is written)."""
        history = read_history(life.job.run_dir)
        while life.seen < len(history):
            rec = history[life.seen]
            objective = rec.get(objective_column(self.cfg.pbt.objective))
            if isinstance(objective, (int, float)) and math.isfinite(objective):
                life.best = objective if life.best is None else max(life.best, objective)
            epoch = int(rec["iteration"])
            if epoch % self.epochs_per_interval == 0:
                ckpt = checkpoint_at(life.job.run_dir, epoch)
                ready = (self.exchange.published(life.member, life.job.run_dir, epoch // self.epochs_per_interval)
                         if self.exchange is not None else ckpt is not None)
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
        if self.exchange is not None:
            self.exchange.keep(life.member, life.job.run_dir, interval)
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
            if not self.decide(life, interval, frames) and self.exchange is not None:  # it waits for a verdict
                self.exchange.go_on(life.job.run_dir, interval)

    def decide(self, life: Life, interval: int, frames: int) -> bool:
        """Whether the member copies or mutates (and was sent its verdict, or restarted)."""
        p = self.cfg.pbt
        assert p is not None
        ex = self.exchange
        if ex is not None and life.member in ex.in_place:  # its last verdict is not taken yet (one ended waits no more)
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
        segment = ex.segments.get((d.source, source.iteration)) if ex is not None else None
        if (segment if ex is not None else ckpt_from) is None:
            self.log("decision", member=life.member, interval=interval, source=d.source, reason=d.reason,
                     done=f"kept: the source has no {'published state' if ex else 'checkpoint'} of that interval")
            return False
        own = dict(life.values)
        source_values = self.values_at[(d.source, source.iteration)]
        taken = start_values(p.replace_rule, own, source_values, self.rules, rng)
        bounds = {k: (PBT_KEYS[k].lo, PBT_KEYS[k].hi) for k in taken if k in PBT_KEYS}
        new = mutate(taken, p.mutation, p.mutation_rate, (p.change_range[0], p.change_range[1]), rng, bounds)
        self.exploits += 1
        verdict = ex.next_id() if ex is not None else None
        self.log("decision", member=life.member, interval=interval, frames=frames, source=d.source,
                 source_interval=source.iteration, source_frames=source.frames, reason=d.reason, copies=d.copies,
                 values_before=own, values_taken=taken, values=new, exploit=p.exploit,
                 **({"segment": segment, "id": verdict} if ex is not None else {"checkpoint": str(ckpt_from)}))
        if ex is not None:
            assert segment is not None and verdict is not None
            ex.take(verdict, life, frames, d.source, source.iteration, segment, new, source_values)
            life.started_frames = source.frames  # DexPBT's grace counts from the exploit
            say(f"pbt: member {life.member} at interval {interval}: {d.reason}; takes member {d.source}'s state "
                f"({source.frames} frames) in place with {value_overrides(new)}")
            return True
        say(f"pbt: member {life.member} at interval {interval}: {d.reason}; restarts from member {d.source}'s "
            f"checkpoint ({source.frames} frames) with {value_overrides(new)}")
        slot = life.job.slot
        assert slot is not None
        self.stop([life])
        self.start(life.member, new, slot, source=ckpt_from, started_frames=source.frames,
                   source_values=source_values, source_interval=source.iteration)
        return True

    def collect_acks(self) -> None:
        """Log each in-place exploit its member has taken (or ended without taking): the member's values now."""
        if self.exchange is not None:
            self.exchange.collect_acks(lambda life: life.job.returncode is not None or self.poll(life) is not None)

    def finish(self, wall_s: float) -> dict[str, Any]:
        """The best member by its last objective; its last checkpoint and policy record into ``<run>/pbt/best/``."""
        assert self.cfg.pbt is not None
        column = objective_column(self.cfg.pbt.objective)
        members = []
        for m, life in sorted(self.lives.items()):
            last = (read_history(life.job.run_dir) or [{}])[-1]
            members.append({"member": m, "lives": life.index + 1, "return": last.get(OBJECTIVE),
                            "objective": last.get(column), "values": life.values, "run_dir": str(life.job.run_dir)})
        scored = [x for x in members if isinstance(x["objective"], (int, float)) and math.isfinite(x["objective"])]
        summary: dict[str, Any] = {"status": "ok", "run_dir": str(self.run_dir), "wall_s": wall_s,
                                   "exploits": self.exploits, "members": members}
        if scored:
            best = max(scored, key=lambda x: x["objective"])
            found = last_checkpoint(Path(best["run_dir"]))
            if found is not None:
                dest = self.pbt_dir / "best"
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(found[0], dest / found[0].name)
                shutil.copyfile(found[0].parent / RECORD, dest / RECORD)
                summary["best"] = {"member": best["member"], "return": best["return"], "objective": best["objective"],
                                   "checkpoint": str(dest / found[0].name)}
            summary["metrics"] = {OBJECTIVE: best["return"]}
        self.log("finished", **{k: v for k, v in summary.items() if k != "members"})
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        return summary


def run_population(cfg: Config, run_dir: Path, overrides: list[str]) -> dict[str, Any]:
    """``mode=train`` with ``pbt``: run the population (exit 2 before any start for what is not built).

    On several nodes node 0 runs the controller and every other node the agent of its members
    (:mod:`gmiexp.pbt.nodes`), after the same checks as node 0's.
    """
    resolve_nodes(cfg.launch)
    if cfg.launch.node_rank:
        Population(cfg, run_dir, overrides).check()
        return nodes.serve_members(cfg, run_dir, overrides)
    summary = Population(cfg, run_dir, overrides).run()
    best = summary.get("best")
    print(f"gmiexp pbt ok: {len(summary['members'])} members, {summary['exploits']} exploits, wall "
          f"{summary['wall_s']:.1f}s" + (f" | best member {best['member']} return {best['return']:.4g}: "
                                         f"{best['checkpoint']}" if best else "") + f" | {run_dir}", flush=True)
    return summary

