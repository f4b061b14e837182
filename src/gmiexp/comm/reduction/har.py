"""HAR, hierarchical reduction (paper section 4.1, Figure 4c), with a third level across nodes.

1. intra-GPU: the GMIs on one GPU reduce through host shared memory (MPR);
2. inter-GPU: one leader per GPU all-reduces the GPU sums with the other GPU
   leaders of its node (NCCL on GPUs, gloo on CPU); on CPU it works in place
   on the shared result buffer;
3. inter-node (only when the members span nodes): the first GPU leader of each
   node all-reduces the node sums with the other nodes' leaders, then
   broadcasts the total to its node's GPU leaders;
4. intra-GPU broadcast: the other GMIs of the GPU read the total from the
   shared buffer.

On one node step 3 is empty and HAR is the paper's two levels. Shared-memory
arenas only ever join the GMIs of one GPU of one node, so no arena spans nodes.
Across nodes exactly one gradient per node crosses the network (MRR's rings
send one per ring), which is what the inter-node term of Table 2 charges.

Leader rule. The paper picks the GMI whose ``GMI_id % M == t`` (M GMIs per
GPU, ``0 <= t < M``), which with GPU-major ids is the t-th GMI of each GPU.
gmiexp uses that form so uneven layouts work too: the leader of GPU d is
``mpl[d][t % len(mpl[d])]``, with ``t = 0`` by default (equal to the paper's
rule on even layouts with GPU-major ids). A node's leader is its first GPU's leader.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.reduction.collective import Collective, TorchCollective
from gmiexp.comm.reduction.mpr import arena_name, open_arena
from gmiexp.comm.reduction.shm import ShmArena
from gmiexp.comm.reduction.strategy import REDUCTIONS, Reduction


def leaders(mpl: Sequence[Sequence[int]], t: int = 0) -> list[int]:
    """The leader GMI of every GPU: the t-th GMI on it (cyclically on GPUs with fewer GMIs)."""
    return [li[t % len(li)] for li in mpl]


class Hierarchical:
    """The HAR structure of one layout, as seen by ``rank``; ``name`` prefixes the shared segments.

    ``nodes[n][d]`` lists the member GMIs on GPU d of node n (``Plan.node_map``); a one-node layout is
    ``[mpl]``.
    """

    def __init__(
        self,
        nodes: Sequence[Sequence[Sequence[int]]],
        rank: int,
        coll: Collective,
        name: str,
        t: int = 0,
        timeout_s: float | None = None,
    ) -> None:
        self.coll = coll
        self.rank = rank
        self.node_leaders_of = [leaders(mpl, t) for mpl in nodes]  # per node: its GPU leaders
        self.node_leaders = [ls[0] for ls in self.node_leaders_of]  # one per node
        coll.prepare([*self.node_leaders_of, self.node_leaders])
        where = next(((n, d) for n, mpl in enumerate(nodes) for d, li in enumerate(mpl) if rank in li), None)
        self.local: list[int] = list(nodes[where[0]][where[1]]) if where else []
        self.leaders: list[int] = list(self.node_leaders_of[where[0]]) if where else []  # this node's GPU leaders
        self.is_leader = rank in self.leaders
        self.arena: ShmArena | None = None
        # one arena per GPU of a node; every GMI takes part in the single construction barrier
        label = f"{name}n{where[0]}g{where[1]}" if where else f"{name}x"
        self.arena = open_arena(label, self.local, rank, coll, timeout_s)

    @property
    def levels(self) -> int:
        """2 on one node (the paper's HAR), 3 across nodes."""
        return 3 if len(self.node_leaders) > 1 else 2

    def _across(self, x: torch.Tensor) -> None:
        """GPU-leader steps on ``x``: sum over the node's GPU leaders, then over nodes, then back down."""
        self.coll.all_reduce(x, self.leaders)
        if len(self.node_leaders) > 1:
            head = self.leaders[0]
            if self.rank == head:
                self.coll.all_reduce(x, self.node_leaders)
            self.coll.broadcast(x, head, self.leaders)

    def _inter(self, result: torch.Tensor, flat: torch.Tensor) -> bool:
        """Leader step: reduce the GPU sum across GPUs and nodes, in place in the shared buffer."""
        if flat.is_cuda:  # through the device (NCCL), then back to the shared buffer for the others
            flat.copy_(result)
            self._across(flat)
            result.copy_(flat)
            return True
        self._across(result)
        return False

    def reduce(self, flat: torch.Tensor, divisor: int | None = None) -> None:
        """Sum ``flat`` in place over every GMI of the layout (then divide by ``divisor`` if given)."""
        if not self.local:
            return
        if self.arena is None:  # alone on its GPU: it is the leader
            self._across(flat)
            if divisor:
                flat.div_(divisor)
            return
        inter = len(self.leaders) > 1 or len(self.node_leaders) > 1
        step = self._inter if (inter and self.is_leader) else None
        self.arena.allreduce(flat, divisor, leader_step=step, has_leader_step=inter)

    def close(self) -> None:
        if self.arena is not None:
            self.arena.close()
            self.arena = None


@REDUCTIONS.register("har")
class HAR(Reduction):
    """Hierarchical reduction over the members' GMI-to-GPU map per node; uneven GMIs per GPU allowed."""

    name = "har"
    nccl = True

    def __init__(
        self,
        mgr: GMIManager,
        members: list[int],
        *,
        collective: Collective | None = None,
        t: int = 0,
        timeout_s: float | None = None,
    ) -> None:
        super().__init__(mgr, members)
        self.tree = Hierarchical(
            mgr.plan.node_map(self.members),
            mgr.rank,
            collective or TorchCollective(mgr),
            arena_name(mgr, "har"),
            t=t,
            timeout_s=timeout_s,
        )

    def allreduce_(self, flat: torch.Tensor, average: bool = True) -> torch.Tensor:
        """As :meth:`Reduction.allreduce_`, with the averaging fused into the shared-memory copy out."""
        t0 = time.perf_counter()
        if len(self.members) > 1 and self.is_member:
            self.tree.reduce(flat, len(self.members) if average else None)
        self.comm_s += time.perf_counter() - t0
        self.calls += 1
        return flat

    def _reduce(self, flat: torch.Tensor) -> None:
        self.tree.reduce(flat)

    def close(self) -> None:
        self.tree.close()
