"""What every layout template receives, and helpers they share."""

from __future__ import annotations

from dataclasses import dataclass

from gmiexp.config import LayoutConfig
from gmiexp.errors import invalid
from gmiexp.hardware import Hardware


@dataclass
class LayoutRequest:
    """The sizing knobs of a run, already type-checked by Hydra."""

    layout: LayoutConfig
    hardware: Hardware
    num_gpus: int
    gmis_per_gpu: int
    num_envs: int
    mode: str = "train"

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
