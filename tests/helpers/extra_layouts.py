"""A layout defined outside src/ (tests/layouts/test_layout_registry.py): one class plus its config node."""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from gmiexp.config import LayoutConfig
from gmiexp.layouts import LAYOUTS, Layout, LayoutKind, LayoutRequest, get
from gmiexp.plan import GMI, Plan

NAME = "tcg_ex_plus"


class TCGExPlus(Layout):
    """TCG_EX plus one more holistic training GMI on the last GPU (an uneven GMI-to-GPU map)."""

    kind = LayoutKind.SYNC
    default_role = "ppo"  # an existing role: rl-games' PPO in every GMI

    def build(self, req: LayoutRequest) -> Plan:
        plan = get("tcg_ex").build(req)
        last = plan.gmis[-1]
        plan.gmis.append(GMI(id=len(plan.gmis), device=last.device, local_index=last.local_index + 1,
                             roles=list(last.roles), num_envs=req.num_envs))
        plan.trainer_group.append(plan.gmis[-1].id)
        return plan


def register() -> None:
    """Register the layout and its config-group entry (what ``conf/layout/tcg_ex_plus.yaml`` would hold)."""
    LAYOUTS.register(NAME)(TCGExPlus)
    ConfigStore.instance().store(group="layout", name=NAME, node=LayoutConfig(name=NAME))


def unregister() -> None:
    LAYOUTS.unregister(NAME)
    ConfigStore.instance().repo["layout"].pop(f"{NAME}.yaml", None)


def main(argv: list[str]) -> None:
    """``python -m gmiexp argv`` with the layout registered first (what a user's plugin module would do)."""
    import sys

    from gmiexp.__main__ import main as gmiexp_main

    register()
    sys.argv = ["gmiexp", *argv]
    gmiexp_main()
