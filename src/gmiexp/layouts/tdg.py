"""TDG (serving): task-dedicated GMIs, one simulator GMI and one agent GMI per pair.

Every step the simulator GMI sends its states (with rewards and dones) to its agent GMI and
waits for the actions back (Table 4: COM = 2S + A + W per step), both through shared-memory
slot rings. ``plan.channels`` holds the ``[agent, simulator]`` pairs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gmiexp.errors import invalid
from gmiexp.layouts.layout import LAYOUTS, Layout, LayoutKind, LayoutRequest
from gmiexp.plan import GMI, Plan

if TYPE_CHECKING:
    from gmiexp.costmodel.templates import CostTerms


@LAYOUTS.register("tdg")
class TDG(Layout):
    kind = LayoutKind.SERVING
    default_role = "tdg"

    def build(self, req: LayoutRequest) -> Plan:
        """Per GPU, ``gmis_per_gpu / 2`` (simulator, agent) pairs on the same device."""
        req.check()
        if req.gmis_per_gpu % 2:
            raise invalid("gmis_per_gpu", req.gmis_per_gpu, f"an even integer >= 2 for layout={req.layout.name} "
                          "(one simulator GMI and one agent GMI per pair)")
        gmis: list[GMI] = []
        pairs: list[list[int]] = []
        for d in range(req.num_gpus):
            for p in range(req.gmis_per_gpu // 2):
                sim = GMI(id=len(gmis), device=d, local_index=2 * p, roles=["simulator"], num_envs=req.num_envs)
                agent = GMI(id=len(gmis) + 1, device=d, local_index=2 * p + 1, roles=["agent"], num_envs=0)
                gmis += [sim, agent]
                pairs.append([agent.id, sim.id])
        return Plan(gmis=gmis, layout=req.layout.name, backend="", reduction="", trainer_group=[], channels=pairs)

    def resource(self, t: CostTerms) -> float:
        return (t.T_s * t.R_s + t.T_a * t.alpha * t.R_a) / (t.T_s + t.T_a)

    def comm(self, t: CostTerms) -> float:
        return 2 * t.S + t.A + t.W
