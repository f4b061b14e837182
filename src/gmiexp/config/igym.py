"""IsaacGymEnvs' command-line habits, read the way an IsaacGymEnvs user means them.

``test=True`` plays ``checkpoint=`` (``mode=eval``); ``headless`` is accepted (gmiexp opens no viewer, so
``headless=False`` changes nothing, and it says so once); ``seed=-1`` draws a random seed, recorded in the
config and the Plan; ``capture_video=True`` films an evaluation episode every ``capture_video_freq`` epochs
while training (:mod:`gmiexp.rl.rlgames.filming`). A misspelt key is refused before Hydra sees it, naming
the valid keys (:func:`gmiexp.config.cli_keys.check_overrides`), not Hydra's ``+key`` that would then fail.
"""

from __future__ import annotations

import secrets
import sys

from gmiexp.config.enums import Mode
from gmiexp.errors import ConfigError

#: Observation and action sizes of the IsaacGymEnvs tasks (paper Table 6).
ISAAC_DIMS = {"Ant": (60, 8), "Anymal": (48, 12), "BallBalance": (24, 3), "FrankaCabinet": (23, 9),
              "Humanoid": (108, 21), "ShadowHand": (211, 20)}


def apply(cfg: object) -> None:
    """Resolve the habits in place (``cfg``: a typed :class:`~gmiexp.config.Config`); notes go to stderr."""
    if cfg.test:  # type: ignore[attr-defined]
        cfg.mode = Mode.eval  # type: ignore[attr-defined]
    if not cfg.headless:  # type: ignore[attr-defined]
        print("gmiexp: note: headless=False changes nothing: gmiexp opens no viewer (capture_video=True films "
              "evaluation episodes instead)", file=sys.stderr, flush=True)
    if cfg.seed == -1:  # type: ignore[attr-defined]
        if int(cfg.launch.nnodes) > 1:  # type: ignore[attr-defined]
            raise ConfigError("invalid seed=-1 with launch.nnodes > 1: every node would draw its own; "
                              "valid: the same seed >= 0 on every node")
        cfg.seed = secrets.randbelow(2**31)  # type: ignore[attr-defined]
        print(f"gmiexp: seed=-1: random seed {cfg.seed} (recorded in the plan)",  # type: ignore[attr-defined]
              file=sys.stderr, flush=True)
