"""``pbt.exploit=inplace``, the controller's side: the members' published states, their verdicts and acknowledgements.

Each member publishes its state into a shared-memory segment at every interval's end and waits there for its
verdict (:mod:`gmiexp.rl.exploit`, the members' side). The exchange names those segments and keeps each interval's
until no decision can still ask for it, posts the verdicts (a source on another node relays its state's bytes to
the member's node first, :mod:`gmiexp.pbt.nodes`) and logs each exploit its member took, with its seconds from
decision to training again. The segments go under the controller's run tag (a later launcher sweeps them if the
controller was killed), or under a node agent's for a member of another node.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from gmiexp.pbt import nodes
from gmiexp.pbt.members import Life
from gmiexp.rl import exploit
from gmiexp.shm.cleanup import cleanup_run
from gmiexp.shm.names import launcher_tag


@dataclass
class InPlace:
    """An in-place exploit posted to a member and not yet acknowledged."""

    control: exploit.Control
    life: Life
    decided: float  # time.time() of the decision
    frames: int  # the member's frames at the interval decided on (what it trains past them is thrown away)


@dataclass
class Exchange:
    """The states published, the verdicts posted and not yet taken, the states relayed between nodes."""

    node_of: Callable[[int], int]  # a member's node (0: the controller's)
    log: Callable[..., None]  # an event into the population's log
    link: nodes.Link | None = None  # several nodes: node 0's side of the agents
    tag: str = field(default_factory=launcher_tag)  # names this pid: a later launcher sweeps it if killed
    verdicts: int = 0  # verdicts sent (each member waits for one at every interval's end); a resume's go on
    segments: dict[tuple[int, int], str] = field(default_factory=dict)  # (member, interval) -> its published state
    in_place: dict[int, InPlace] = field(default_factory=dict)  # member -> its exploit not yet acknowledged
    relayed: dict[tuple[int, int], tuple[int, str, str]] = field(default_factory=dict)  # (member, interval) ->
    # (its node, the segment it was relayed into there, the store key): an in-place exploit across nodes
    arriving: list[tuple[str, str, Path, exploit.Control]] = field(default_factory=list)  # relayed verdicts for
    # members of node 0 whose state is on its way (store key, segment, run dir, verdict)

    def tag_of(self, member: int) -> str:
        """The run tag member ``member``'s states go under: its node's (the controller's on node 0)."""
        node = self.node_of(member)
        return self.link.agents[node].tag if self.link and node else self.tag

    def spec(self, member: int, epochs_per_interval: int) -> exploit.MemberSpec:
        """What a member's GMIs publish under and whom they follow: its node's agent, or this controller."""
        node = self.node_of(member)
        follow = self.link.agents[node].pid if self.link and node else os.getpid()
        return exploit.MemberSpec(self.tag_of(member), member, epochs_per_interval, follow)

    def segment(self, member: int, interval: int) -> str:
        return exploit.state_segment(self.tag_of(member), member, interval)

    def published(self, member: int, run_dir: Path, interval: int) -> bool:
        """Whether the member published its state of ``interval``: its segment here, its record on another node."""
        if self.node_of(member):
            return any(int(r["interval"]) == interval for r in exploit.published_records(run_dir))
        return exploit.published(self.segment(member, interval))

    def keep(self, member: int, run_dir: Path, interval: int) -> None:
        """Hold the member's state of ``interval``, once published, for the decisions at that interval."""
        if self.published(member, run_dir, interval):
            self.segments[(member, interval)] = self.segment(member, interval)

    def next_id(self) -> int:
        """A new verdict's id: one more than the last sent (a member's run dir must never see an id twice)."""
        self.verdicts += 1
        return self.verdicts

    def go_on(self, run_dir: Path, interval: int) -> None:
        """The verdict that the member goes on as it is (it waits for one at every interval's end)."""
        exploit.post_control(run_dir, exploit.go_on(interval, self.next_id()))

    def take(self, verdict: int, life: Life, frames: int, source: int, interval: int, segment: str,
             values: dict[str, Any], source_values: dict[str, Any]) -> None:
        """Post the member the verdict to take ``source``'s state of ``interval`` and go on with ``values``.

        ``verdict`` is its id, from :meth:`next_id`: the one the decision logged.
        """
        control = exploit.Control(verdict, source, interval, segment, values, dict(source_values))
        self.relay(control, life.member, life)
        self.in_place[life.member] = InPlace(control, life, time.time(), frames)

    def relay(self, control: exploit.Control, member: int, life: Life) -> None:
        """Post ``control`` to a member; a source on another node relays its state's bytes to the member's first."""
        source_node, node = self.node_of(control.source), self.node_of(member)
        if not control.copies or source_node == node or self.link is None:
            exploit.post_control(life.job.run_dir, control)
            return
        key = self.link.relay(control.source, control.interval, control.segment, source_node)
        name = nodes.relayed_segment(self.tag_of(member), control.source, control.interval, member)
        self.relayed[(member, control.interval)] = (node, name, key)
        here = replace(control, segment=name)
        if node == 0:  # the controller's own node: it writes the bytes itself once they arrive (deliver)
            self.arriving.append((key, name, life.job.run_dir, here))
            self.deliver()
        else:
            self.link.send(node, "verdict", key=key, segment=name, run_dir=str(life.job.run_dir),
                           control=asdict(here))
        self.log("relayed", member=member, node=node, source=control.source, source_node=source_node,
                 interval=control.interval, segment=name, id=control.id)

    def deliver(self) -> None:
        """Post each relayed verdict for a member here whose state arrived, its bytes in a segment of this node."""
        assert self.link is not None or not self.arriving
        for item in list(self.arriving):
            key, name, run_dir, control = item
            data = self.link.fetch(key) if self.link is not None else None
            if data is not None:
                exploit.write_segment(name, data)
                exploit.post_control(run_dir, control)
                self.arriving.remove(item)

    def drop(self, member: int, segment: str) -> None:
        node = self.node_of(member)
        if node and self.link is not None:
            self.link.send(node, "drop", segments=[segment])
        else:
            exploit.drop(segment)

    def collect_acks(self, ended: Callable[[Life], bool]) -> None:
        """Log each in-place exploit its member has taken (its life takes the values) or ended without taking."""
        for member, pending in list(self.in_place.items()):
            life, control = pending.life, pending.control
            ack = next((a for a in exploit.acks(life.job.run_dir) if a.get("id") == control.id), None)
            if ack is None:
                if ended(life):
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
            nodes.say(f"pbt: member {member} took member {control.source}'s state of interval {control.interval} in "
                      f"place at its epoch {ack['epoch']} ({float(ack['time']) - pending.decided:.2f}s after the "
                      "decision)")

    def drop_segments(self, deciding: set[int], complete: Callable[[int], bool]) -> None:
        """Unlink the published states no decision or pending exploit can still ask for.

        ``deciding``: the intervals with records still to decide; ``complete``: every member posted the interval.
        """
        waiting = deciding | {e.control.interval for e in self.in_place.values()}
        for key in [k for k in self.segments if complete(k[1]) and k[1] not in waiting]:
            self.drop(key[0], self.segments.pop(key))
        for key in [k for k in self.relayed if k[1] not in waiting and k[0] not in self.in_place]:
            node, name, stored = self.relayed.pop(key)
            self.drop(key[0], name)
            if self.link is not None:
                self.link.forget(stored)

    def close(self) -> None:
        """Unlink every state published under this tag, whatever a member left."""
        cleanup_run(self.tag)
