"""A population on several nodes: node 0's controller, an agent on every other node, one store between them.

Every node runs the same command (``launch.nnodes=N``, its own ``launch.node_rank``), as a run's nodes do
(docs/multi-node.md). Node 0 runs the controller (:mod:`gmiexp.pbt.controller`) and serves a ``TCPStore`` on
``launch.rdzv_endpoint``; node r runs :func:`serve_members`, an agent that starts, stops and watches the members
placed on its slots on the controller's word and posts their exits. Members are placed in blocks
(:func:`gmiexp.pbt.members.place`): ``ceil(population / nnodes)`` per node, each node's on its own pack slots
(:func:`gmiexp.pbt.placement.placement`).

The run dir is shared, as the anchors share their workspace across nodes: the controller reads every member's
history and checkpoints and writes its verdicts into the member's run dir as on one node. Node 0 leaves a random
token there; an agent that does not find it exits 2.

In place, a member's state stays in its own node's shared memory. An exploit across nodes moves the bytes through
the store (:meth:`Link.relay`): the source's node uploads its segment, the member's node writes the bytes into a
segment of its own and only then posts the verdict, so a member's side (:mod:`gmiexp.rl.exploit`) is the same on
every node and no file carries a state.

Keys, under ``gmiexp/<rdzv_id>/pbt/``: ``token``; ``agent/<r>`` (the agent's tag and pid, or its refusal);
``cmd/<r>/<n>`` (the controller's commands to node r, in order); ``exit/<member>/<life>``; ``beat/<r>``;
``left/<r>`` (an agent that stopped on its own: a signal, or its error); ``ended/<r>``; ``state/<m>/<i>`` (bytes).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from torch.distributed import DistError

from gmiexp.config import Config
from gmiexp.errors import ConfigError, LaunchError
from gmiexp.launch.rendezvous import NodeStore, join, native_stderr_to, serve
from gmiexp.pack import runner
from gmiexp.pack.runner import Job
from gmiexp.pbt.placement import Placement, placement
from gmiexp.rl import exploit
from gmiexp.shm.cleanup import cleanup_run
from gmiexp.shm.names import launcher_tag, segment_name
from gmiexp.signals import sigterm_raises

TOKEN_FILE = "nodes.token"  # in <run>/pbt/: node 0's token, which every agent must read there
POLL_S = 0.05  # an agent's loop: commands, relayed states and its members' exits (a store check is ~0.1 ms)
END_WAIT_S = 30.0
STOP_GRACE_S = 20.0  # a stopped member's time to write its checkpoint after SIGINT, then SIGKILL (every node's)


def relayed_segment(tag: str, source: int, interval: int, member: int) -> str:
    """Where member ``member``'s node writes member ``source``'s state of ``interval`` it relays."""
    return segment_name(f"pbt-m{source}-i{interval}-to{member}", tag, unique=False)


class Keys:
    """The population's keys in the run's store (module docstring)."""

    def __init__(self, ns: NodeStore) -> None:
        self.ns, self.store = ns, ns.store

    def key(self, *parts: object) -> str:
        return "/".join([self.ns.prefix, "pbt", *map(str, parts)])

    def has(self, *parts: object) -> bool:
        return bool(self.store.check([self.key(*parts)]))

    def put(self, value: Any, *parts: object) -> None:
        self.store.set(self.key(*parts), json.dumps(value, default=str))

    def read(self, *parts: object) -> Any:
        """The value, or None while it is not there (never blocks)."""
        return json.loads(self.store.get(self.key(*parts))) if self.has(*parts) else None


@dataclass(frozen=True)
class AgentInfo:
    node: int
    tag: str  # the run tag its members' segments go under (its own pid: a later sweep on its node can tell)
    pid: int  # its members stop waiting for a verdict once it is gone
    host: str
    overrides: tuple[str, ...] = ()  # its command's overrides that must be node 0's (:func:`same_command`)


#: what may differ between the nodes' commands: the node's own rank and address, how it waits, Hydra's settings
PER_NODE = ("launch.node_rank", "launch.local_addr", "launch.monitor_interval_s", "launch.progress",
            "launch.heartbeat_timeout_s", "launch.rdzv_timeout_s", "hydra.")


def same_command(overrides: list[str]) -> tuple[str, ...]:
    """The overrides every node of a population must share, in a comparable order."""
    return tuple(sorted(o for o in overrides if not o.split("=", 1)[0].lstrip("+~").startswith(PER_NODE)))


class Link(Keys):
    """Node 0's side: the agents, the commands to them, the members' exits and the states relayed between nodes."""

    def __init__(self, ns: NodeStore, nnodes: int, timeout_s: float, heartbeat_s: float) -> None:
        super().__init__(ns)
        self.nnodes, self.timeout_s, self.heartbeat_s = nnodes, timeout_s, heartbeat_s
        self.sent = dict.fromkeys(range(1, nnodes), 0)
        self.agents: dict[int, AgentInfo] = {}
        self.seen: dict[int, tuple[int, float]] = {}
        self.uploaded: set[str] = set()

    @classmethod
    def host(cls, cfg: Config, run_dir: Path) -> Link:
        la = cfg.launch
        ns = serve(str(la.rdzv_endpoint), str(la.rdzv_id), float(la.rdzv_timeout_s), run_dir / "pbt" / "store.log")
        return cls(ns, int(la.nnodes), float(la.rdzv_timeout_s), float(la.heartbeat_timeout_s))

    def meet(self, run_dir: Path, overrides: list[str]) -> dict[int, AgentInfo]:
        """Leave the token in the shared run dir and wait for every node's agent.

        Exit 2 on every node for an agent that refused, or one whose command differs from node 0's.
        """
        token = secrets.token_hex(8)
        (run_dir / "pbt").mkdir(parents=True, exist_ok=True)
        (run_dir / "pbt" / TOKEN_FILE).write_text(token)
        self.put(token, "token")
        end = time.monotonic() + self.timeout_s
        for r in range(1, self.nnodes):
            while (got := self.read("agent", r)) is None:
                if time.monotonic() > end:
                    raise LaunchError(f"node {r}'s agent did not come within {self.timeout_s:g}s "
                                      "(launch.rdzv_timeout_s): start the same command there with "
                                      f"launch.node_rank={r}")
                time.sleep(POLL_S)
            if "error" in got:
                (run_dir / "pbt" / TOKEN_FILE).unlink(missing_ok=True)
                raise ConfigError(got["error"])
            self.agents[r] = AgentInfo(**{**got, "overrides": tuple(got.get("overrides", ()))})
            self.seen[r] = (0, time.monotonic())
        mine = same_command(overrides)
        differ = {r: a for r, a in self.agents.items() if a.overrides != mine}
        if differ:
            said = "; ".join(f"node {r}: " + ", ".join([f"has {o}" for o in a.overrides if o not in mine]
                                                        + [f"lacks {o}" for o in mine if o not in a.overrides])
                             for r, a in differ.items())
            reason = (f"invalid command on node {', '.join(map(str, differ))}: every node of a population runs node "
                      f"0's command but for its own {', '.join(PER_NODE)}*; what differs from node 0's: {said}; "
                      "valid: the same command on every node")
            (run_dir / "pbt" / TOKEN_FILE).unlink(missing_ok=True)
            self.end(2, reason)
            raise ConfigError(reason)
        return self.agents

    def send(self, node: int, op: str, **fields: Any) -> None:
        self.sent[node] += 1
        self.put({"op": op, **fields}, "cmd", node, self.sent[node])

    def exit_code(self, member: int, life: int) -> int | None:
        got = self.read("exit", member, life)
        return None if got is None else int(got)

    def left(self, node: int) -> dict[str, Any] | None:
        return self.read("left", node)

    def check(self) -> None:
        """Every agent beats and is there: KeyboardInterrupt for one stopped by a signal, LaunchError otherwise."""
        now = time.monotonic()
        for r in self.agents:
            gone = self.left(r)
            if gone is not None:
                if gone.get("code") == 130:  # the population stops as on Ctrl-C: the same commands go on with it
                    say(f"pbt: node {r}'s agent was stopped ({gone.get('reason')}); stopping every member")
                    raise KeyboardInterrupt(f"node {r}'s agent was stopped ({gone.get('reason')})")
                raise LaunchError(f"node {r}'s agent stopped: {gone.get('reason')}")
            beats = int(self.store.add(self.key("beat", r), 0))
            count, since = self.seen[r]
            if beats != count:
                self.seen[r] = (beats, now)
            elif now - since > self.heartbeat_s:
                raise LaunchError(f"node {r}'s agent is gone: no heartbeat for {now - since:.1f}s "
                                  f"(launch.heartbeat_timeout_s={self.heartbeat_s:g})")

    def stop(self, lives: dict[int, list[tuple[int, int]]], grace_s: float) -> dict[tuple[int, int], int]:
        """Stop these (member, life)s on their nodes; each one's exit code (137 for one no agent reported)."""
        for node, pairs in lives.items():
            self.send(node, "stop", lives=pairs, grace_s=grace_s)
        end = time.monotonic() + grace_s + 10.0
        codes: dict[tuple[int, int], int] = {}
        wanted = [p for pairs in lives.values() for p in pairs]
        while True:
            for m, life in wanted:
                if (m, life) not in codes and (c := self.exit_code(m, life)) is not None:
                    codes[(m, life)] = c
            if len(codes) == len(wanted) or time.monotonic() > end:
                return {p: codes.get(p, 137) for p in wanted}
            time.sleep(POLL_S)

    def relay(self, source: int, interval: int, segment: str, source_node: int) -> str:
        """The store key member ``source``'s state of ``interval`` is (or is being) uploaded to."""
        key = self.key("state", source, interval)
        if key not in self.uploaded:
            self.uploaded.add(key)
            if source_node == 0:
                self.store.set(key, exploit.segment_bytes(segment))
            else:
                self.send(source_node, "upload", segment=segment, key=key)
        return key

    def fetch(self, key: str) -> bytes | None:
        """A relayed state's bytes once its node uploaded them, else None (never blocks: the node may be gone)."""
        return bytes(self.store.get(key)) if self.store.check([key]) else None

    def forget(self, key: str) -> None:
        if key in self.uploaded:
            self.uploaded.discard(key)
            self.store.delete_key(key)

    def end(self, code: int, reason: str = "") -> None:
        """Tell every agent the population is over (``code``: its exit) and wait for each to be done."""
        for r in self.agents:
            try:
                if self.left(r) is None:
                    self.send(r, "end", code=code, reason=reason)
            except DistError:  # the store is failing: the agents see it and stop themselves
                return
        end = time.monotonic() + END_WAIT_S
        for r in self.agents:
            while time.monotonic() < end and self.left(r) is None and not self.has("ended", r):
                time.sleep(POLL_S)


class Agent(Keys):
    """Node r's side: starts and stops its members on the controller's word, posts their exits, relays states."""

    def __init__(self, ns: NodeStore, node: int, place: Placement, run_dir: Path) -> None:
        super().__init__(ns)
        self.node, self.place, self.run_dir = node, place, run_dir
        self.tag = launcher_tag()
        self.jobs: dict[tuple[int, int], Job] = {}
        self.verdicts: list[dict[str, Any]] = []  # relayed verdicts whose state has not arrived yet
        self.next = 1
        self.code: int | None = None
        self.reason = ""  # node 0's, when it ends the population with a refusal (code 2)
        self.started = 0

    def meet(self, timeout_s: float, overrides: list[str] | None = None) -> None:
        """Find node 0's token in the run dir (a shared one), then say who this agent is and what it was told."""
        from datetime import timedelta

        self.store.wait([self.key("token")], timedelta(seconds=timeout_s))
        token = json.loads(self.store.get(self.key("token")))
        path = self.run_dir / "pbt" / TOKEN_FILE
        try:
            there = path.read_text()
        except OSError:
            there = None
        if there != token:
            reason = (f"invalid hydra.run.dir={self.run_dir} on node {self.node}: node 0's population is not there "
                      f"({path} {'holds another token' if there else 'is missing'}); a population on several "
                      "nodes needs one run dir every node sees; valid: a run dir on a shared file system, the same "
                      "on every node")
            self.put({"error": reason}, "agent", self.node)
            raise ConfigError(reason)
        info = AgentInfo(self.node, self.tag, os.getpid(), socket.gethostname(), same_command(overrides or []))
        self.put(asdict(info), "agent", self.node)

    def serve(self) -> None:
        """Until the controller ends the population; its stop, or this node's, stops every member here first."""
        try:
            while self.code is None:
                self.store.add(self.key("beat", self.node), 1)
                while self.code is None and self.has("cmd", self.node, self.next):
                    cmd = self.read("cmd", self.node, self.next)
                    self.next += 1
                    self.handle(cmd)
                self.deliver()
                self.poll()
                if self.code is None:
                    time.sleep(POLL_S)
        except KeyboardInterrupt as e:  # this node's Ctrl-C, SIGTERM (a Slurm requeue): the population stops
            self.leave(130, f"interrupted ({e or 'Ctrl-C'})")
            raise
        except DistError as e:  # the store failed: node 0's controller is gone
            self.stop_all(post=False)
            raise LaunchError(f"node {self.node}: node 0's population controller is gone (its store failed: "
                              f"{str(e).splitlines()[0] if str(e) else type(e).__name__}); every member here was "
                              "stopped and kept its last checkpoint; the same command on every node goes on") from None
        except Exception as e:  # this agent's own failure: node 0 stops the population (exit 1), naming it
            self.leave(1, f"{type(e).__name__}: {e}")
            raise
        self.put(True, "ended", self.node)

    def leave(self, code: int, reason: str) -> None:
        with contextlib.suppress(DistError):
            self.put({"code": code, "reason": reason}, "left", self.node)
        self.stop_all(post=True)

    def handle(self, cmd: dict[str, Any]) -> None:
        op = cmd["op"]
        if op == "start":
            slot = self.place.pool[int(cmd["slot"])]
            job = Job(int(cmd["member"]), list(cmd["overrides"]), Path(cmd["run_dir"]),
                      slot_overrides=self.place.overrides)
            runner.start(job, slot, [])
            self.jobs[(job.num, int(cmd["life"]))] = job
            self.started += 1
        elif op == "stop":
            pairs = [(int(m), int(k)) for m, k in cmd["lives"]]
            jobs = {p: self.jobs[p] for p in pairs if p in self.jobs and self.jobs[p].returncode is None}
            runner.stop(list(jobs.values()), float(cmd["grace_s"]))
            for (m, k), job in jobs.items():
                self.put(job.returncode, "exit", m, k)
        elif op == "upload":
            self.store.set(cmd["key"], exploit.segment_bytes(cmd["segment"]))
        elif op == "verdict":  # a relayed state: the bytes into a segment here, then the verdict (deliver)
            self.verdicts.append(cmd)
            self.deliver()
        elif op == "drop":
            for name in cmd["segments"]:
                exploit.drop(name)
        elif op == "end":
            self.code, self.reason = int(cmd.get("code", 0)), str(cmd.get("reason", ""))
            self.stop_all(post=True)
        else:
            raise ValueError(f"unknown command {op!r} from node 0 (another gmiexp version there?)")

    def deliver(self) -> None:
        """Post each relayed verdict whose state arrived, once its bytes are in a segment here."""
        for cmd in list(self.verdicts):
            if self.store.check([cmd["key"]]):
                exploit.write_segment(cmd["segment"], bytes(self.store.get(cmd["key"])))
                exploit.post_control(Path(cmd["run_dir"]), exploit.Control(**cmd["control"]))
                self.verdicts.remove(cmd)

    def poll(self) -> None:
        for (m, k), job in self.jobs.items():
            if job.returncode is None and job.proc is not None and (code := job.proc.poll()) is not None:
                runner.finish(job, code)
                self.put(code, "exit", m, k)

    def stop_all(self, post: bool) -> None:
        running = {p: j for p, j in self.jobs.items() if j.returncode is None}
        runner.stop(list(running.values()), STOP_GRACE_S)
        if post:
            for (m, k), job in running.items():
                try:
                    self.put(job.returncode, "exit", m, k)
                except DistError:
                    return


def serve_members(cfg: Config, run_dir: Path, overrides: list[str]) -> dict[str, Any]:
    """Node r (> 0) of a population: the agent of the members placed here, until node 0's controller ends it."""
    la = cfg.launch
    node = int(la.node_rank or 0)
    place = placement(cfg, overrides)
    log = run_dir / "pbt" / f"store-node{node}.log"
    ns = join(str(la.rdzv_endpoint), str(la.rdzv_id), node, float(la.rdzv_timeout_s), log)
    agent = Agent(ns, node, place, run_dir)
    agent.meet(float(la.rdzv_timeout_s), overrides)
    say(f"pbt: node {node} serves the members placed here ({len(place.pool)} slots); tag {agent.tag}")
    with sigterm_raises(lambda signum: KeyboardInterrupt(f"signal {signum}")), place.shared_daemons():
        try:  # c10d's C++ frames (a store that failed) go to the log; the agent's own error line to stderr
            with native_stderr_to(log):
                agent.serve()
        finally:
            cleanup_run(agent.tag)  # every state its members published or it relayed
    members = sorted({m for m, _ in agent.jobs})
    if agent.code == 2:
        raise ConfigError(agent.reason)
    if agent.code == 130:
        raise KeyboardInterrupt(f"node 0 stopped the population; members {members} here kept their checkpoints")
    if agent.code:
        raise LaunchError(f"node 0's population failed (exit {agent.code}): its console and {run_dir / 'pbt'} say "
                          f"why; members {members} here were stopped")
    print(f"gmiexp pbt node {node} ok: members {', '.join(map(str, members)) or 'none'} ({agent.started} lives) | "
          f"{run_dir}", flush=True)
    return {"status": "ok", "node": node, "members": members, "lives": agent.started}


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
