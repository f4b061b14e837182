"""A population on several nodes, the parts: where members go, the shared run dir, an agent's commands and the
states relayed between nodes through a real store on loopback (an agent in this process, no member started)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from pathlib import Path

import pytest
import torch

from gmiexp.errors import ConfigError
from gmiexp.launch.launcher import free_port
from gmiexp.launch.rendezvous import join, serve
from gmiexp.pbt import nodes
from gmiexp.pbt.members import place, refuse_nodes
from gmiexp.rl import exploit
from gmiexp.shm.cleanup import cleanup_run, leftovers
from gmiexp.shm.names import launcher_tag


@pytest.mark.parametrize(("population", "nnodes", "where"), [
    (4, 2, [(0, 0), (0, 1), (1, 0), (1, 1)]),
    (5, 2, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]),
    (3, 3, [(0, 0), (1, 0), (2, 0)]),
    (4, 1, [(0, 0), (0, 1), (0, 2), (0, 3)]),
])
def test_members_go_to_nodes_in_blocks(population: int, nnodes: int, where: list[tuple[int, int]]) -> None:
    assert place(population, nnodes) == where
    assert refuse_nodes(population, nnodes) == []


@pytest.mark.parametrize(("population", "nnodes"), [(2, 3), (4, 3), (5, 4)])
def test_a_node_without_a_member_is_refused(population: int, nnodes: int) -> None:
    (reason,) = refuse_nodes(population, nnodes)
    assert f"invalid launch.nnodes={nnodes} for pbt.population={population}" in reason and "valid:" in reason


class Pair:
    """Node 0's link and node 1's agent on one real store (the agent's commands handled by the test)."""

    def __init__(self, run_dir: Path) -> None:
        endpoint, run_id = f"127.0.0.1:{free_port()}", uuid.uuid4().hex[:8]  # keys of this test only
        self.link = nodes.Link(serve(endpoint, run_id, 30.0, run_dir / "store0.log"), 2, 30.0, 30.0)
        place = nodes.Placement(None, [0], 1, [], None)  # type: ignore[arg-type]  # no member starts here
        self.agent = nodes.Agent(join(endpoint, run_id, 1, 30.0, run_dir / "store1.log"), 1, place, run_dir)

    def meet(self, run_dir: Path, node1: tuple[str, ...] = ()) -> dict:
        box: dict = {}

        def node0() -> None:
            try:
                box["agents"] = self.link.meet(run_dir, ["task=Cartpole", "launch.node_rank=0", "hydra.run.dir=x"])
            except Exception as e:  # noqa: BLE001 (handed to the test)
                box["error"] = e

        t = threading.Thread(target=node0)
        t.start()
        try:
            self.agent.meet(30.0, ["task=Cartpole", "launch.node_rank=1", "hydra.run.dir=y", *node1])
            if node1:  # node 0 ends it at once: the agent's loop takes its refusal
                self.agent.serve()
        except ConfigError as e:
            box["agent_error"] = e
        t.join(30)
        return box

    def commands(self) -> None:
        """Node 1 handles what node 0 sent it since the last call."""
        while self.agent.has("cmd", 1, self.agent.next):
            cmd = self.agent.read("cmd", 1, self.agent.next)
            self.agent.next += 1
            self.agent.handle(cmd)


def test_agents_meet_node_0_in_a_shared_run_dir(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    box = pair.meet(tmp_path)
    assert "error" not in box and "agent_error" not in box, box
    (info,) = box["agents"].values()
    assert info.node == 1 and info.tag == pair.agent.tag and info.pid > 0


def test_an_agent_that_does_not_see_node_0_s_run_dir_refuses_on_both_nodes(tmp_path: Path) -> None:
    pair = Pair(tmp_path / "node1_own")
    (tmp_path / "node1_own").mkdir(exist_ok=True)
    box = pair.meet(tmp_path)  # node 0 leaves its token in tmp_path; node 1 looks in node1_own
    assert isinstance(box["agent_error"], ConfigError) and isinstance(box["error"], ConfigError)
    for e in (box["agent_error"], box["error"]):
        assert "on node 1: node 0's population is not there" in str(e) and "valid: a run dir on a shared" in str(e)
    assert not (tmp_path / "pbt" / nodes.TOKEN_FILE).exists()  # node 0's refusal leaves no token behind


def test_a_node_started_with_another_command_is_refused_on_both_nodes(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    box = pair.meet(tmp_path, node1=("num_envs=64",))
    assert isinstance(box["error"], ConfigError), box
    said = str(box["error"])
    assert "invalid command on node 1" in said and "node 1: has num_envs=64" in said
    assert "valid: the same command on every node" in said
    assert pair.agent.code == 2 and pair.agent.reason == str(box["error"])  # serve_members raises it: exit 2
    assert pair.link.has("ended", 1)


def test_a_state_crosses_nodes_bit_for_bit_and_lands_before_its_verdict(tmp_path: Path) -> None:
    """Node 1's member published; node 0 asks for it, then has node 1 take node 0's member's state, both relayed."""
    pair = Pair(tmp_path)
    box = pair.meet(tmp_path)
    assert "agents" in box, box
    tag0 = launcher_tag()
    try:
        state1 = {"w": torch.arange(1000, dtype=torch.float32), "epoch": 3}
        seg1 = exploit.publish(exploit.MemberSpec(pair.agent.tag, 2, 1), 1, state1, tmp_path)
        # node 1 -> node 0: node 1 uploads its member's segment; node 0 reads the same bytes
        key = pair.link.relay(2, 1, seg1, source_node=1)
        assert pair.link.relay(2, 1, seg1, source_node=1) == key and pair.link.sent[1] == 1  # one upload per state
        pair.commands()
        assert pair.link.fetch(key) == exploit.segment_bytes(seg1)
        assert pair.link.fetch(pair.link.key("state", 9, 9)) is None  # not uploaded: no wait
        # node 0 -> node 1: node 0 uploads; node 1 writes a segment of its own, then posts the verdict
        seg0 = exploit.publish(exploit.MemberSpec(tag0, 0, 1), 1, {"w": torch.ones(7)}, tmp_path)
        key0 = pair.link.relay(0, 1, seg0, source_node=0)
        name = nodes.relayed_segment(pair.agent.tag, 0, 1, 3)
        member_dir = tmp_path / "m3"
        member_dir.mkdir()
        control = exploit.Control(5, 0, 1, name, {"train.e_clip": 0.25})
        pair.link.send(1, "verdict", key=key0, segment=name, run_dir=str(member_dir),
                       control=json.loads(json.dumps(control.__dict__)))
        assert exploit.take_control(member_dir) is None  # not before node 1 handled it
        pair.commands()
        got = exploit.take_control(member_dir)
        assert got == control
        data = exploit.segment_bytes(name)
        assert hashlib.sha256(data).hexdigest() == hashlib.sha256(exploit.segment_bytes(seg0)).hexdigest()
        assert torch.equal(exploit.unpack(data)["w"], torch.ones(7))
        # a verdict whose state is not there yet waits in the agent, which goes on serving, until it arrives
        late = exploit.Control(6, 0, 2, nodes.relayed_segment(pair.agent.tag, 0, 2, 3), {})
        pair.link.send(1, "verdict", key=pair.link.key("state", 0, 2), segment=late.segment,
                       run_dir=str(member_dir), control=json.loads(json.dumps(late.__dict__)))
        pair.commands()
        assert exploit.take_control(member_dir) is None and len(pair.agent.verdicts) == 1
        pair.link.relay(0, 2, seg0, source_node=0)
        pair.agent.deliver()
        assert exploit.take_control(member_dir) == late and pair.agent.verdicts == []
        pair.link.send(1, "drop", segments=[name, seg1, late.segment])
        pair.link.forget(key0)
        pair.commands()
        assert leftovers(pair.agent.tag) == [] and not pair.link.has("state", 0, 1)
    finally:
        cleanup_run(tag0)
        cleanup_run(pair.agent.tag)


def seen(read, want, timeout_s: float = 10.0):
    """What node 0 reads once it reads ``want``: a TCPStore client's set does not wait for the server, so another
    client's read right after it can come first (as it did on a loaded host); node 0's loop reads again anyway."""
    deadline = time.monotonic() + timeout_s
    while (got := read()) != want and time.monotonic() < deadline:
        time.sleep(0.01)
    return got


def test_the_end_and_the_exit_codes_reach_node_0(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    box = pair.meet(tmp_path)
    assert "agents" in box, box
    pair.agent.put(0, "exit", 2, 0)
    assert seen(lambda: pair.link.exit_code(2, 0), 0) == 0 and pair.link.exit_code(3, 0) is None
    pair.link.check()  # it beat at none of its loops yet, within the heartbeat timeout: fine
    stopped = {"code": 130, "reason": "interrupted (signal 15)"}
    pair.agent.put(stopped, "left", 1)
    assert seen(lambda: pair.link.left(1), stopped) == stopped
    with pytest.raises(KeyboardInterrupt, match="node 1's agent was stopped"):
        pair.link.check()
    failed = {"code": 1, "reason": "its member failed"}
    pair.agent.put(failed, "left", 1)
    assert seen(lambda: pair.link.left(1), failed) == failed
    with pytest.raises(Exception, match="node 1's agent stopped: its member failed"):
        pair.link.check()


def test_mode_plan_of_a_population_on_two_nodes_shows_a_member_s_plan_and_each_member_s_node(tmp_path: Path,
                                                                                           capsys) -> None:
    from gmitest import compose_config

    from gmiexp.app import run_plan

    cfg = compose_config("mode=plan", "hardware=cpu", "task=Cartpole", "pbt=default", "pbt.population=3",
                         "launch.nnodes=2", f"launch.rdzv_endpoint=127.0.0.1:{free_port()}")
    assert run_plan(cfg, tmp_path, overrides=["task=Cartpole", "pbt=default", "pbt.population=3"])["status"] == "ok"
    err = capsys.readouterr().err
    assert "plan (member 0 on its slot gpu0/0; each member alike on its own): 2 GMIs on 1 node" in err
    assert "  node 1: python -m gmiexp task=Cartpole pbt=default pbt.population=3 launch.nnodes=2 " in err
    assert "torchrun" not in err  # a population's nodes run agents, not torchrun's workers
    assert [line.split(":")[0] for line in err.splitlines() if line.startswith("  member ")] == [
        "  member 0 (node 0, gpu0/0", "  member 1 (node 0, gpu0/1", "  member 2 (node 1, gpu0/0"]


def test_an_agent_that_fails_stops_the_population_naming_why(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    box = pair.meet(tmp_path)
    assert "agents" in box, box
    pair.link.send(1, "bogus")
    with pytest.raises(ValueError, match="unknown command 'bogus'"):
        pair.agent.serve()
    with pytest.raises(Exception, match="node 1's agent stopped: ValueError: unknown command 'bogus'"):
        pair.link.check()
