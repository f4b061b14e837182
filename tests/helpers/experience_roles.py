"""Experience-sharing roles with injected delays, for races between agents and trainers (run with role=...)."""

from __future__ import annotations

import time
from typing import Any

from gmiexp.rl.experience.roles import TDGEXRole


class SlowTrainerTDGEX(TDGEXRole):
    """TDG_EX whose trainer stalls after each published update, as a descheduled process on a busy host would.

    The trainer's per-round history row (written right after the publish) goes through ``heartbeat``
    with an ``iteration``; the agents meanwhile collect and send their next rollout.
    """

    def heartbeat(self, **progress: Any) -> None:
        if "iteration" in progress and self.ctx.gmi.has("trainer"):
            time.sleep(0.3)
        super().heartbeat(**progress)
