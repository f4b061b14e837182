"""TDG (serving): task-dedicated GMIs, one simulator GMI and one agent GMI per pair.

Every step the simulator GMI sends its states (with rewards and dones) to its agent GMI and
waits for the actions back (Table 4: COM = 2S + A + W per step), both through shared-memory
slot rings. ``plan.channels`` holds the ``[agent, simulator]`` pairs.
"""

from __future__ import annotations

from gmiexp.errors import invalid
from gmiexp.layouts.base import LayoutRequest
from gmiexp.plan import GMI, Plan

ROLE = "tdg"


def build(req: LayoutRequest) -> Plan:
    """Per GPU, ``gmis_per_gpu / 2`` (simulator, agent) pairs on the same device."""
    req.check()
    if req.gmis_per_gpu % 2:
        raise invalid("gmis_per_gpu", req.gmis_per_gpu,
                      "an even integer >= 2 for layout=tdg (one simulator GMI and one agent GMI per pair)")
    gmis: list[GMI] = []
    pairs: list[list[int]] = []
    for d in range(req.num_gpus):
        for p in range(req.gmis_per_gpu // 2):
            sim = GMI(id=len(gmis), device=d, local_index=2 * p, roles=["simulator"], num_envs=req.num_envs)
            agent = GMI(id=len(gmis) + 1, device=d, local_index=2 * p + 1, roles=["agent"], num_envs=0)
            gmis += [sim, agent]
            pairs.append([agent.id, sim.id])
    return Plan(gmis=gmis, layout="tdg", backend="", reduction="", trainer_group=[], channels=pairs, role=ROLE)
