"""What a layout template is: its kind, default role, build, checks and cost-model rows, and the registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from gmiexp.config import LayoutConfig
from gmiexp.errors import invalid
from gmiexp.hardware import Hardware
from gmiexp.plan import GMI, Plan
from gmiexp.registry import Registry

if TYPE_CHECKING:
    from gmiexp.costmodel.templates import CostTerms


class LayoutKind(StrEnum):
    """What a layout's GMIs do: serve (no training), train synchronously, or serve and train asynchronously."""

    SERVING = "serving"
    SYNC = "sync"
    ASYNC = "async"


@dataclass
class LayoutRequest:
    """The sizing knobs of a run, already type-checked by Hydra."""

    layout: LayoutConfig
    hardware: Hardware
    num_gpus: int
    gmis_per_gpu: int
    num_envs: int

    def check(self) -> None:
        """Validate the numbers every layout depends on."""
        if self.num_gpus < 1:
            raise invalid("num_gpus", self.num_gpus, "an integer >= 1")
        if self.gmis_per_gpu < 1:
            raise invalid("gmis_per_gpu", self.gmis_per_gpu, "an integer >= 1")
        if self.num_envs < 1:
            raise invalid("num_envs", self.num_envs, "a positive integer (environments per GMI)")
        hw = self.hardware
        if hw.has_gpu and self.num_gpus > len(hw.gpus):
            raise invalid("num_gpus", self.num_gpus, f"1..{len(hw.gpus)} on this host ({hw.describe()})")


def colocated_gmis(req: LayoutRequest, roles: list[str]) -> list[GMI]:
    """``num_gpus x gmis_per_gpu`` GMIs that each hold ``roles``, GPU-major ids (GMI k on GPU k // gmis_per_gpu)."""
    req.check()
    return [GMI(id=d * req.gmis_per_gpu + i, device=d, local_index=i, roles=list(roles), num_envs=req.num_envs)
            for d in range(req.num_gpus) for i in range(req.gmis_per_gpu)]


class Layout(ABC):
    """A layout template (paper section 5.1): subclass it in one module and register it.

    ::

        @LAYOUTS.register("my_layout")
        class MyLayout(Layout):
            kind = LayoutKind.SYNC
            default_role = "ppo"
            def build(self, req): ...

    plus ``conf/layout/my_layout.yaml`` (``name: my_layout``); nothing else names the layout.
    """

    kind: ClassVar[LayoutKind]
    #: The role the layout runs when the user left ``role=ppo`` (a name in :data:`gmiexp.role.ROLES`).
    default_role: ClassVar[str] = "ppo"
    #: Agents send experience to trainer GMIs over channels (rl-games' own agent does not run then).
    experience: ClassVar[bool] = False

    @abstractmethod
    def build(self, req: LayoutRequest) -> Plan:
        """The GMIs (and trainer group, channels) of the Plan; ``Plan.layout`` is ``req.layout.name``."""

    def configure(self, plan: Plan, cfg: Any) -> None:  # noqa: B027 - most layouts have nothing to record
        """Check and record what the layout's roles read from the Plan beyond the GMIs (nothing by default)."""

    def resource(self, t: CostTerms) -> float | None:
        """R^I of the paper's Tables 4-5 for this layout; None when the paper has no row for it."""
        return None

    def comm(self, t: CostTerms) -> float | None:
        """COM of Tables 4-5 (bytes per iteration); None when the paper has no row for it."""
        return None


#: Every layout, filled by importing :mod:`gmiexp.layouts` (whose ``__init__`` imports the variant modules).
LAYOUTS: Registry[type[Layout]] = Registry("layout", load="gmiexp.layouts")
