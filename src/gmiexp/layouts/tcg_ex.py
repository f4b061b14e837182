"""TCG_EX: holistic training GMIs (simulator + agent + trainer in each), data-parallel PPO.

The paper's preferred template for synchronous training (Table 5): no
experience crosses a GMI boundary; only gradients are reduced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gmiexp.layouts.layout import LAYOUTS, Layout, LayoutKind, LayoutRequest, colocated_gmis
from gmiexp.plan import Plan

if TYPE_CHECKING:
    from gmiexp.costmodel.templates import CostTerms


@LAYOUTS.register("tcg_ex")
class TCGEx(Layout):
    kind = LayoutKind.SYNC
    default_role = "ppo"

    def build(self, req: LayoutRequest) -> Plan:
        """``num_gpus x gmis_per_gpu`` GMIs, GPU-major ids (GMI k is on GPU k // gmis_per_gpu)."""
        gmis = colocated_gmis(req, ["simulator", "agent", "trainer"])
        return Plan(gmis=gmis, layout=req.layout.name, backend="", reduction="",
                    trainer_group=[g.id for g in gmis])

    def resource(self, t: CostTerms) -> float:
        return max(t.R_s, t.R_a, t.R_t)

    def comm(self, t: CostTerms) -> float:
        return t.ring()
