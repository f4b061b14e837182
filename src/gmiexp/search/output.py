"""Write the chosen configuration as a Hydra preset that the CLI runs, and the search trace as JSON.

The preset is a ``# @package _global_`` file in a ``preset/`` config group
(not ``experiment/``: a group of that name would shadow the top-level
``experiment=<name>`` knob). ``python -m gmiexp --config-dir <dir> +preset=<name>``
runs it; with ``hydra.searchpath: [file://presets]`` in conf/config.yaml the
``--config-dir`` is not needed from the repository root.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from gmiexp.search.algorithm import SearchOutcome

GROUPS = ("task", "backend", "layout", "reduction", "channel", "hardware", "train")


def preset_dir() -> Path:
    """Root of the user's preset search path (``$GMIEXP_PRESET_DIR``, default ``./presets``)."""
    return Path(os.environ.get("GMIEXP_PRESET_DIR") or "presets")


def chosen_overrides(outcome: SearchOutcome, num_gpus: int) -> list[str]:
    return [f"num_gpus={num_gpus}", f"gmis_per_gpu={outcome.gmis_per_gpu}", f"num_envs={outcome.num_envs}"]


def preset_text(outcome: SearchOutcome, num_gpus: int, groups: dict[str, str], values: dict[str, Any],
                header: str) -> str:
    """YAML of a global preset: group choices as ``override /group``, then the chosen knobs."""
    body: dict[str, Any] = {"defaults": [{f"override /{g}": c} for g, c in groups.items()]}
    body.update(values)
    body.update({"num_gpus": num_gpus, "gmis_per_gpu": outcome.gmis_per_gpu, "num_envs": outcome.num_envs})
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    return "# @package _global_\n" + comment + yaml.safe_dump(body, sort_keys=False)


def write_preset(text: str, name: str, roots: list[Path]) -> list[Path]:
    """Write ``<root>/preset/<name>.yaml`` under every root; return the paths."""
    paths = []
    for root in roots:
        path = root / "preset" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(path)
    return paths


def _finite(x: float | None) -> float | str | None:
    return x if x is None or math.isfinite(x) else str(x)


def trace(outcome: SearchOutcome) -> list[dict[str, Any]]:
    return [{"gmis_per_gpu": s.gmis_per_gpu, "num_envs": s.num_envs, "decision": s.decision,
             "sat": _finite(s.sat), "estimate": s.estimate, "length": s.length, "cost_share": s.cost_share,
             **asdict(s.result)} for s in outcome.steps]


def write_trace(path: Path, report: dict[str, Any]) -> None:
    path.write_text(json.dumps(report, indent=1, default=str))
