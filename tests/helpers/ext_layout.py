"""A layout defined outside src/ in one file (tests/test_extension_points.py): ``layout.name=ext_layout:Twins``.

Nothing registers it: the layout registry takes ``"module:Class"`` as the name itself, as ``role=`` does. A
config-group option (``layout=ext_twins``) is one YAML in a search-path directory: ``name: ext_layout:Twins``.
"""

from __future__ import annotations

from gmiexp.errors import invalid
from gmiexp.layouts import Layout, LayoutKind, LayoutRequest
from gmiexp.plan import GMI, Plan

SPEC = f"{__name__}:Twins"


class Twins(Layout):
    """TCG_EX with every GMI split in two: ``2 x gmis_per_gpu`` holistic GMIs per GPU, ``num_envs // 2`` envs each.

    The run's environments stay ``num_gpus x gmis_per_gpu x num_envs``; its GMIs (count and envs) are
    unlike any built-in layout's, so a test can tell that these are the GMIs that ran.
    """

    kind = LayoutKind.SYNC
    default_role = "ppo"  # rl-games' PPO in every GMI, gradients reduced by the plan's reduction

    def build(self, req: LayoutRequest) -> Plan:
        req.check()
        if req.num_envs < 2:
            raise invalid("num_envs", req.num_envs, f"an integer >= 2 for layout={req.layout.name} (split in two)")
        per_gpu = 2 * req.gmis_per_gpu
        gmis = [GMI(id=d * per_gpu + i, device=d, local_index=i, roles=["simulator", "agent", "trainer"],
                    num_envs=req.num_envs // 2) for d in range(req.num_gpus) for i in range(per_gpu)]
        return Plan(gmis=gmis, layout=req.layout.name, backend="", reduction="", trainer_group=[g.id for g in gmis])
