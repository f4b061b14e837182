"""The Role API: the program each GMI runs (the paper's Listing 1, ``DRL_role``).

Subclass :class:`Role`, implement :meth:`Role.run`, and launch it with
``python -m gmiexp role=my_pkg.my_module:MyRole``. Every GMI of the Plan
runs one instance; ``allreduce`` reduces over the trainer group with the
Plan's strategy, ``send``/``recv`` move tensors between GMIs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.reduction import Reduction
from gmiexp.errors import ConfigError
from gmiexp.plan import GMI, Plan
from gmiexp.registry import Registry, import_spec
from gmiexp.status import StatusWriter


@dataclass
class GMIContext:
    """What a role gets: its GMI, the Plan, the manager (groups, p2p), the reduction, a status writer."""

    plan: Plan
    gmi: GMI
    mgr: GMIManager
    reduction: Reduction
    status: StatusWriter

    @property
    def run_dir(self) -> Path:
        return Path(self.plan.run_dir)


class Role(ABC):
    """Base class of a GMI program. Override :meth:`run`; return per-GMI metrics (optional)."""

    #: True when :meth:`run` returns soon after :func:`gmiexp.signals.stop_requested` turns true (Ctrl-C keeps
    #: what was trained); a role that does not look is stopped with SIGTERM at the first Ctrl-C instead
    stops_gracefully: bool = False

    def __init__(self, ctx: GMIContext) -> None:
        self.ctx = ctx

    @property
    def gmi_id(self) -> int:
        return self.ctx.gmi.id

    @property
    def plan(self) -> Plan:
        return self.ctx.plan

    @property
    def device(self) -> torch.device:
        return self.ctx.mgr.torch_device

    @abstractmethod
    def run(self) -> dict[str, Any] | None:
        """The GMI's main routine (simulator, agent and/or trainer work)."""

    def allreduce(self, tensor: torch.Tensor, average: bool = False) -> torch.Tensor:
        """Sum (or average) ``tensor`` over the trainer group in place, with the Plan's strategy."""
        if tensor.is_contiguous():
            self.ctx.reduction.allreduce_(tensor.detach().view(-1), average=average)  # in place, no copy
            return tensor
        flat = tensor.detach().reshape(-1).clone()
        self.ctx.reduction.allreduce_(flat, average=average)
        tensor.copy_(flat.view_as(tensor))
        return tensor

    def send(self, tensor: torch.Tensor, dst_gmi: int) -> None:
        """Send ``tensor`` to GMI ``dst_gmi`` (blocks until it is received)."""
        self.ctx.mgr.send(tensor, dst_gmi)

    def recv(self, like: torch.Tensor, src_gmi: int) -> torch.Tensor:
        """Receive a tensor shaped like ``like`` from GMI ``src_gmi``."""
        return self.ctx.mgr.recv(like, src_gmi)

    def heartbeat(self, **progress: Any) -> None:
        """Tell the launcher this GMI is alive (call it from the main loop; a silent GMI is declared hung)."""
        self.ctx.status.beat(**progress)


#: Roles by name. A role registers itself with ``@ROLES.register("name")``; the built-ins are added as
#: ``"module:Class"`` text, imported on first use, because they pull in rl-games (about 1.5 s of
#: torch._dynamo imports), which the launcher process never needs: only the GMIs run roles.
ROLES: Registry[type[Role]] = Registry("role")
ROLES.add("ppo", "gmiexp.rl.rlgames.ppo_role:PPORole")  # layout tcg_ex: rl-games' own PPO agent
ROLES.add("serve", "gmiexp.rl.experience.serving:ServeRole")
ROLES.add("tdg", "gmiexp.rl.experience.serving:TDGRole")
ROLES.add("tdg_ex", "gmiexp.rl.experience.roles:TDGEXRole")
ROLES.add("a3c", "gmiexp.rl.experience.roles:A3CRole")
ROLES.add("rslrl", "gmiexp.rl.rslrl.role:RslRlRole")  # train=rslrl, layout tcg_ex: rsl_rl's OnPolicyRunner and PPO
#: the roles whose every GMI runs one whole PPO learner (rl-games' agent, rsl_rl's runner): only their GMIs record
#: ``train.info_key``, and only they can be population members
PPO_ROLES = ("ppo", "rslrl")


def check_role(spec: str) -> None:
    """Validate a role spec at plan time; registered names are known without importing them.

    A ``module:Class`` role is imported, so a bad module or class exits 2 before anything is launched.
    """
    if spec not in ROLES:
        load_role(spec)


def load_role(spec: str) -> type[Role]:
    """A registered name (``ppo``, ``serve``, ``tdg``, ``tdg_ex``, ``a3c``, ...) or ``package.module:ClassName``."""
    if spec in ROLES:
        return ROLES.get(spec)
    if ":" not in spec:
        raise ConfigError(f"invalid role: {spec!r}; valid: {', '.join(ROLES)}, "
                          "or <module>:<Class> of a gmiexp.role.Role subclass")
    valid = f"{', '.join(ROLES)}, or <module>:<Class> of a gmiexp.role.Role subclass"
    mod_name, _, cls_name = spec.partition(":")
    cls = import_spec(spec, "role", valid)
    if not (isinstance(cls, type) and issubclass(cls, Role)):
        raise ConfigError(f"invalid role: {spec!r}; {cls_name!r} is not a gmiexp.role.Role subclass in {mod_name}")
    return cls
