"""What the agent and trainer loops read from the experience role that runs them.

The role (:mod:`gmiexp.rl.experience.roles`) builds the model, fields and settings once and hands itself to
:func:`gmiexp.rl.experience.agent_loop.serve` or :func:`gmiexp.rl.experience.trainer.train`; the loops
see it through this protocol, so they do not import the role that imports them.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import nn

from gmiexp.comm.channels import FieldSpec
from gmiexp.config import AsyncConfig, ChannelConfig, TrainConfig
from gmiexp.plan import Plan
from gmiexp.rl.rlgames.policy import Spaces
from gmiexp.rl.rlgames.states import StateLayout
from gmiexp.role import GMIContext


class ExperienceSeat(Protocol):
    """One GMI's place in an experience layout: its context, the Plan's settings and the built model."""

    ctx: GMIContext
    sync: bool  #: agents wait for the weights of each update (TDG_EX) or never (decoupled async)
    train_cfg: TrainConfig
    acfg: AsyncConfig
    channel: ChannelConfig
    tag: str  #: the run's shared-memory tag
    timeout: float  #: how long a drain may wait (``async.drain_timeout_s``)
    spaces: Spaces
    model: nn.Module
    states: StateLayout | None  #: a recurrent model's states; None for a feed-forward one
    fields: list[FieldSpec]

    @property
    def gmi_id(self) -> int: ...

    @property
    def plan(self) -> Plan: ...

    @property
    def device(self) -> torch.device: ...

    def allreduce(self, tensor: torch.Tensor, average: bool = False) -> torch.Tensor: ...

    def heartbeat(self, **progress: Any) -> None: ...
