"""Where Warp keeps its compiled kernels, so that runs and tests compile them once per machine.

mjlab's MuJoCo Warp kernels take ~30 s to compile on first use (10-15 s more per robot). Warp
reads ``WARP_CACHE_PATH`` when it initialises (at first use, not at import), and every GMI
inherits the launcher's environment, so setting the variable here, before any simulator is
built, gives every process of every run the same cache.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

ENV_VAR = "WARP_CACHE_PATH"


def default_warp_cache() -> Path:
    """``$XDG_CACHE_HOME/gmiexp/warp`` (``~/.cache/gmiexp/warp``): next to the search's profile cache."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gmiexp" / "warp"


def configure_warp_cache() -> Path:
    """Point Warp at the one kernel cache (a ``WARP_CACHE_PATH`` the user set wins); returns it.

    Must run before Warp initialises; a Warp already initialised elsewhere keeps its own cache,
    which is reported rather than silently changed.
    """
    path = Path(os.environ.setdefault(ENV_VAR, str(default_warp_cache())))
    path.mkdir(parents=True, exist_ok=True)
    warp = sys.modules.get("warp")
    resolved = getattr(getattr(warp, "config", None), "kernel_cache_dir", None)
    if resolved is not None and not Path(resolved).resolve().is_relative_to(path.resolve()):
        logging.getLogger(__name__).warning("Warp already initialised with kernel cache %s, not %s", resolved, path)
    return path
