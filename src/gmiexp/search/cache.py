"""JSON cache of profile results, keyed by task, hardware, code version and profiling settings.

Profiling is the expensive part of a search; a rerun (or a grid after a
search) on the same machine and code reuses every point already measured.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import gmiexp
from gmiexp.search.algorithm import Profiler, ProfileResult


def default_cache_dir() -> Path:
    return Path(os.environ.get("GMIEXP_CACHE_DIR") or Path.home() / ".cache" / "gmiexp" / "profiles")


def code_version(root: Path | None = None) -> str:
    """``gmiexp.__version__`` plus the git commit, and ``.dirty`` with uncommitted edits, from a checkout.

    Dirty trees get their own cache key: profiles taken with edited code must not answer for the
    commit (a rerun after an edit profiles again).
    """
    root = root or Path(gmiexp.__file__).resolve().parents[2]

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=5,
                              check=True).stdout.strip()

    try:
        rev = git("rev-parse", "--short", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return gmiexp.__version__
    return f"{gmiexp.__version__}+g{rev}{'.dirty' if dirty else ''}" if rev else gmiexp.__version__


@dataclass
class ProfileCache:
    """One JSON file per key: ``{"key": {...}, "points": {"G=<g>,N=<n>": ProfileResult}}``."""

    key: dict[str, Any]
    directory: Path

    @property
    def path(self) -> Path:
        digest = hashlib.sha1(json.dumps(self.key, sort_keys=True).encode()).hexdigest()[:16]
        return self.directory / f"{digest}.json"

    def _load(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text())["points"]
        except (OSError, ValueError, KeyError):
            return {}

    def get(self, gmis_per_gpu: int, num_envs: int) -> ProfileResult | None:
        point = self._load().get(f"G={gmis_per_gpu},N={num_envs}")
        return None if point is None else replace(ProfileResult(**point), cached=True)

    def put(self, gmis_per_gpu: int, num_envs: int, result: ProfileResult) -> None:
        points = self._load()
        points[f"G={gmis_per_gpu},N={num_envs}"] = {**asdict(result), "cached": False}
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": self.key, "points": points}, indent=1, sort_keys=True))
        tmp.replace(self.path)


def cached(profile: Profiler, cache: ProfileCache) -> Profiler:
    """Wrap ``profile`` so measured points are stored and reused (timeouts are not cached)."""

    def run(gmis_per_gpu: int, num_envs: int) -> ProfileResult:
        hit = cache.get(gmis_per_gpu, num_envs)
        if hit is not None:
            return hit
        result = profile(gmis_per_gpu, num_envs)
        if result.runnable or "timeout" not in result.error:
            cache.put(gmis_per_gpu, num_envs, result)
        return result

    return run
