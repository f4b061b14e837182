"""Segment names: ``/dev/shm/gmiexp_<run tag>_<name>[_<random>]``, so one run's segments can be found by tag.

The run tag is shared by every GMI of a run (the launcher exports ``GMIEXP_RUN_TAG``); a tag made by
:func:`launcher_tag` also names the launcher's pid, so a later run can tell the run was killed.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

SHM_DIR = Path("/dev/shm")
PREFIX = "gmiexp"
ENV = "GMIEXP_RUN_TAG"
_TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,63}$")
LAUNCHER_TAG_RE = re.compile(rf"^{PREFIX}_(\d+)-[0-9a-f]{{8}}_")  # group 1: the launcher's pid


def run_tag(tag: str | None = None, default: str | None = None) -> str:
    """The run tag: ``tag``, else ``GMIEXP_RUN_TAG``, else ``default``, else one for this process only."""
    tag = tag or os.environ.get(ENV) or default or f"p{os.getpid()}"
    if not _TAG_RE.match(tag):
        raise ValueError(f"invalid run tag {tag!r}; valid: letters, digits, '.', '-' (<= 64 chars)")
    return tag


def launcher_tag(pid: int | None = None) -> str:
    """A run tag that names its launcher's pid (``<pid>-<random>``), so a later run can tell it is dead."""
    return f"{os.getpid() if pid is None else pid}-{uuid.uuid4().hex[:8]}"


def segment_name(name: str, tag: str | None = None, unique: bool = True) -> str:
    """Segment file name for ``name`` in run ``tag``.

    ``unique`` appends a random suffix (a segment whose name travels to its peers); without it the
    name is the same in every process that asks, for peers that must agree on it without a message.
    """
    base = f"{PREFIX}_{run_tag(tag)}_{name}"
    return f"{base}_{uuid.uuid4().hex[:8]}" if unique else base


def run_glob(tag: str) -> str:
    """Glob pattern (under :data:`SHM_DIR`) of every segment of run ``tag``."""
    return f"{PREFIX}_{run_tag(tag)}_*"
