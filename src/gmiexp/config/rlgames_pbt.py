"""Read an rl-games YAML's ``pbt:`` section as it is: ``train=rlgames train.file=<path> pbt=rlgames``.

rl-games master (``rl_games/common/pbt/pbt_cfg.py``, ``docs/PBT.md``) and Isaac Lab (``isaaclab_rl/rl_games/pbt``)
read a top-level ``pbt:`` section beside ``params:``; DexPBT's keys (IsaacGymEnvs ``cfg/pbt/pbt_default.yaml``) are
read too. Each key maps onto a ``pbt.*`` field (``conf/pbt/rlgames.yaml`` interpolates ``${rlgames_pbt:<field>}``,
so a command-line override still wins), is honoured with a note on stderr (what one job of members does instead of
one process per member), or is refused; every refusal at once, exit 2. A ``mutation`` key names rl-games' params the
way the anchors flatten them (``agent.params.config.<key>``; DexPBT's ``train.params.config.<key>``) and maps
through the one rl-games key table (:mod:`gmiexp.config.rlgames_keys`) onto a ``train.*`` key. A key the section
leaves out takes rl-games' default, which is the schema's (:class:`gmiexp.config.schema.PbtConfig`).
"""

from __future__ import annotations

import functools
import sys
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from gmiexp.config.rlgames_keys import BY_SRC
from gmiexp.config.rlgames_yaml import load_doc, locate
from gmiexp.config.schema import PBT_KEYS, PbtConfig
from gmiexp.errors import ConfigError, listed

RESOLVER = "rlgames_pbt"

#: section key -> pbt field, where only the name differs (or not at all)
RENAMED = {"num_policies": "population", **{k: k for k in (
    "objective", "interval_steps", "threshold_std", "threshold_abs", "mutation_rate", "change_range", "start_after",
    "initial_delay", "replace_fraction_worst", "replace_fraction_best", "replace_threshold_frac_std",
    "replace_threshold_frac_absolute")}}
#: section key -> what gmiexp does instead (said on stderr)
NOTES = {
    "enabled": "pbt=rlgames turns population-based training on (without pbt=rlgames the section is not read)",
    "policy_idx": "one gmiexp job runs every member, numbered 0..pbt.population-1",
    "directory": "members exchange state through the population controller, not a shared directory; the "
                 "population's state lives in the run directory",
    "workspace": "members exchange state through the population controller, not a shared workspace",
    "launcher": "no member re-executes itself (pbt.exploit=inplace); pbt.exploit=restart relaunches it through "
                "gmiexp's launcher",
}
#: rl-games' names of the replacement rules -> gmiexp's
RULES = {"threshold": "default", "default": "default", "dexpbt": "dexpbt"}
#: how the anchors prefix a params key in ``mutation`` (rl-games master, Isaac Lab: agent.; DexPBT: train.)
PARAMS_PREFIXES = ("agent.params.", "train.params.")


@dataclass
class Section:
    """A mapped ``pbt:`` section: pbt field -> value, the notes, and the refusals (``key=value: why`` lines)."""

    values: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)


def map_section(section: dict[str, Any]) -> Section:
    """Every key of an rl-games ``pbt:`` section onto ``pbt.*`` (nothing raised: refusals are collected)."""
    out = Section()
    for key, value in section.items():
        if key in RENAMED:
            out.values[RENAMED[key]] = list(value) if key == "change_range" else value
        elif key in NOTES:
            out.notes.append(f"pbt.{key}={value!r}: {NOTES[key]}")
        elif key == "replace_rule":
            _rule(value, out)
        elif key == "mutation":
            _mutation(value, out)
        elif key == "dbg_mode":  # DexPBT's: PBT features with a single member
            if value:
                out.refusals.append(f"pbt.{key}={value!r}: DexPBT's debug mode is not run; valid: False")
        elif key in ("change_min", "change_max"):  # DexPBT's two keys for one range
            lo, hi = section.get("change_min", 1.1), section.get("change_max", 1.5)
            out.values["change_range"] = [lo, hi]
        else:
            known = sorted({*RENAMED, *NOTES, "replace_rule", "mutation", "change_min", "change_max", "dbg_mode"})
            out.refusals.append(f"pbt.{key}={value!r}: not a key of rl-games' (or DexPBT's) pbt section that "
                                f"gmiexp maps; valid: {', '.join(known)}")
    if "objective" not in section:
        out.notes.append(f"pbt.objective left out (rl-games requires one): gmiexp ranks members by "
                         f"{_default('objective')!r}")
    return out


def _rule(value: Any, out: Section) -> None:
    if value in RULES:
        out.values["replace_rule"] = RULES[value]
    else:
        out.refusals.append(f"pbt.replace_rule={value!r}: valid: {', '.join(RULES)}")


def _mutation(value: Any, out: Section) -> None:
    if not isinstance(value, dict):
        out.refusals.append(f"pbt.mutation={value!r}: a mapping of params keys to mutation functions")
        return
    mapped = {}
    for src, fn in value.items():
        dst = _train_key(str(src))
        if dst is None:
            out.refusals.append(f"pbt.mutation.{src}={fn!r}: not an rl-games params.config key that maps onto a "
                                f"train.* key gmiexp mutates; valid: {', '.join(_mutable_sources())}")
        else:
            mapped[dst] = fn
    out.values["mutation"] = mapped


def _train_key(src: str) -> str | None:
    """``agent.params.config.gamma`` -> ``train.gamma`` (None: not a mutable train.* key)."""
    for prefix in PARAMS_PREFIXES:
        if src.startswith(prefix):
            f = BY_SRC.get(src[len(prefix):])
            return f.dst if f is not None and f.dst in PBT_KEYS else None
    return None


def _mutable_sources() -> list[str]:
    return [f"agent.params.{f.src}" for f in BY_SRC.values() if f.dst in PBT_KEYS]


def read(path: Path) -> Section:
    """The file's ``pbt:`` section mapped (exit 2 without one)."""
    doc = load_doc(path)
    section = doc.get("pbt")
    if not isinstance(section, dict):
        raise ConfigError(f"invalid pbt=rlgames with train.file={path}: the file has no pbt: section; valid: an "
                          "rl-games YAML with a top-level pbt: section (rl-games master's format), or pbt=default")
    return map_section(section)


@functools.lru_cache(maxsize=8)
def _read_cached(path: str, _mtime_ns: int) -> Section:
    return read(Path(path))


def rlgames_pbt_value(key: str, *, _root_: Any) -> Any:
    """The ``${rlgames_pbt:key}`` resolver: ``pbt.<key>`` from train.file's ``pbt:`` section (else the default)."""
    if not _root_.train.file:
        raise ConfigError("invalid pbt=rlgames without train.file; valid: train=rlgames train.file=<an rl-games "
                          "YAML with a pbt: section>, or pbt=default")
    path = locate(str(_root_.train.file))
    section = _read_cached(str(path), path.stat().st_mtime_ns)
    if section.refusals:
        raise listed(f"invalid pbt=rlgames with train.file={path}: gmiexp cannot honour {len(section.refusals)} "
                     "key(s) of its pbt: section (nothing was launched)", section.refusals,
                     f"invalid pbt=rlgames with train.file={path}")
    _say_notes(str(path), tuple(section.notes))
    return section.values.get(key, _default(key))


@functools.lru_cache(maxsize=8)
def _say_notes(path: str, notes: tuple[str, ...]) -> None:
    if notes:
        print(f"gmiexp: read the pbt: section of {path} with notes:\n  " + "\n  ".join(notes), file=sys.stderr)


def register_resolver() -> None:
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, rlgames_pbt_value)


def _default(name: str) -> Any:
    """rl-games' default for a field the section leaves out: the schema's."""
    f = {x.name: x for x in fields(PbtConfig)}[name]
    return f.default_factory() if f.default is MISSING else f.default  # type: ignore[misc]
