"""TCG (serving): task-colocated GMIs, each stepping its simulator and running its agent's policy.

The paper's serving block (section 5.1, Table 4): states and actions never cross a GMI boundary
(COM = 0). Experience collection only: no trainer, no channels; the role reports predictions per
second (``async/predictions_per_s``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gmiexp.layouts.layout import LAYOUTS, Layout, LayoutKind, LayoutRequest, colocated_gmis
from gmiexp.plan import Plan

if TYPE_CHECKING:
    from gmiexp.costmodel.templates import CostTerms


@LAYOUTS.register("tcg")
class TCG(Layout):
    kind = LayoutKind.SERVING
    default_role = "serve"

    def build(self, req: LayoutRequest) -> Plan:
        """``num_gpus x gmis_per_gpu`` serving GMIs (simulator + agent), GPU-major ids."""
        gmis = colocated_gmis(req, ["simulator", "agent"])
        return Plan(gmis=gmis, layout=req.layout.name, backend="", reduction="", trainer_group=[], channels=[])

    def resource(self, t: CostTerms) -> float:
        return max(t.R_s, t.R_a)

    def comm(self, t: CostTerms) -> float:
        return 0.0
