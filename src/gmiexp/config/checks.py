"""Valid ranges of config fields, declared once beside each schema (``@ranges``) and enforced before any launch.

A schema class in :mod:`gmiexp.config` lists a check for each of its fields::

    @ranges(seed=Between(0, 2**32 - 1), mode=OneOf("train", "plan"))
    @dataclass
    class Config: ...

:func:`validate` walks a composed :class:`~gmiexp.config.Config` and raises
:func:`gmiexp.errors.invalid` (exit 2) naming the field, the bad value and the
declared range. Each check also offers ``bad_examples()``, so the table-driven
test in ``tests/config/test_config_checks.py`` proves every field refuses bad input,
and fails when a new field is added without a declared range. Boolean fields
need no entry: their type is their range, and OmegaConf enforces it.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gmiexp.errors import invalid, refusal
from gmiexp.registry import Registry, is_spec

RANGES_ATTR = "__ranges__"


class Check(ABC):
    """A field's valid range: ``ok`` decides, ``describe`` says it (the error's 'valid:' part)."""

    @abstractmethod
    def ok(self, value: Any) -> bool: ...

    @abstractmethod
    def describe(self) -> str: ...

    @abstractmethod
    def bad_examples(self) -> list[Any]:
        """Values this check must refuse (the schema test tries each one)."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclasses.dataclass(frozen=True)
class Between(Check):
    """A finite number in [lo, hi]; ``open_lo`` excludes lo (``Between(0, open_lo=True)`` is "> 0")."""

    lo: float | None = None
    hi: float | None = None
    open_lo: bool = False
    open_hi: bool = False
    unit: str = ""

    def ok(self, value: Any) -> bool:
        if not _number(value):
            return False
        if self.lo is not None and (value <= self.lo if self.open_lo else value < self.lo):
            return False
        return not (self.hi is not None and (value >= self.hi if self.open_hi else value > self.hi))

    def describe(self) -> str:
        if self.lo is not None and self.hi is not None and not (self.open_lo or self.open_hi):
            text = f"{_fmt(self.lo)}..{_fmt(self.hi)}"
        else:
            lo = "" if self.lo is None else f"{'>' if self.open_lo else '>='} {_fmt(self.lo)}"
            hi = "" if self.hi is None else f"{'<' if self.open_hi else '<='} {_fmt(self.hi)}"
            text = " and ".join(p for p in (lo, hi) if p) or "any finite number"
        return text + (f" ({self.unit})" if self.unit else "")

    def bad_examples(self) -> list[Any]:
        out: list[Any] = [math.nan]
        if self.lo is not None:
            out.append(self.lo if self.open_lo else self.lo - 1)
        if self.hi is not None:
            out.append(self.hi if self.open_hi else self.hi + 1)
        return out


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def AtLeast(lo: float, unit: str = "") -> Between:  # noqa: N802 - reads as a range, like Between
    return Between(lo, unit=unit)


def Positive(unit: str = "") -> Between:  # noqa: N802
    return Between(0, open_lo=True, unit=unit)


@dataclasses.dataclass(frozen=True)
class OneOf(Check):
    """One of a registry named ``"module:ATTR"`` (read when checked, so it stays current) and/or fixed choices.

    A :class:`~gmiexp.registry.Registry` also takes ``"module:Class"`` of a variant defined outside gmiexp.
    """

    choices: tuple[Any, ...] = ()
    registry: str = ""
    exclude: tuple[Any, ...] = ()

    def values(self) -> list[Any]:
        found: Iterable[Any] = self.choices
        if self.registry:
            module, attr = self.registry.split(":")
            found = [*getattr(importlib.import_module(module), attr), *self.choices]
        return [v for v in found if v not in self.exclude]

    def ok(self, value: Any) -> bool:
        if value in self.values():
            return True
        if self.registry and is_spec(value):  # "module:Class" outside gmiexp; a bad one: ConfigError saying why
            module, attr = self.registry.split(":")
            found = getattr(importlib.import_module(module), attr)
            return isinstance(found, Registry) and found.get(value) is not None
        return False

    def describe(self) -> str:
        return ", ".join(str(v) for v in self.values())

    def bad_examples(self) -> list[Any]:
        return ["nope"]


@dataclasses.dataclass(frozen=True)
class Text(Check):
    """A string; ``pattern`` (a regex it must match in full) narrows it."""

    pattern: str = r".+"
    what: str = "a non-empty string"
    bad: tuple[str, ...] = ()  # values to refuse in the schema test when the pattern admits the empty string

    def ok(self, value: Any) -> bool:
        return isinstance(value, str) and re.fullmatch(self.pattern, value) is not None

    def describe(self) -> str:
        return self.what

    def bad_examples(self) -> list[Any]:
        return [""] if not re.fullmatch(self.pattern, "") else list(self.bad)


@dataclasses.dataclass(frozen=True)
class ExistingFile(Check):
    """Empty (none) or the path of an existing file."""

    what: str = "a file"

    def ok(self, value: Any) -> bool:
        return isinstance(value, str) and (value == "" or Path(value).is_file())

    def describe(self) -> str:
        return f"empty, or an existing {self.what}"

    def bad_examples(self) -> list[Any]:
        return ["/does/not/exist.pth"]


@dataclasses.dataclass(frozen=True)
class Items(Check):
    """A list whose every item passes ``item``; ``min_len`` and ``increasing`` constrain the list itself."""

    item: Check
    min_len: int = 0
    increasing: bool = False

    def ok(self, value: Any) -> bool:
        if not isinstance(value, Sequence) or isinstance(value, str) or len(value) < self.min_len:
            return False
        if self.increasing and any(b <= a for a, b in zip(value, value[1:], strict=False)):
            return False
        return all(self.item.ok(v) for v in value)

    def describe(self) -> str:
        size = f" of at least {self.min_len}" if self.min_len else ""
        order = ", strictly increasing" if self.increasing else ""
        return f"a list{size}{order}; each item {self.item.describe()}"

    def bad_examples(self) -> list[Any]:
        out: list[Any] = [[b] for b in self.item.bad_examples()[-1:]]
        if self.min_len:
            out.append([])
        return out


@dataclasses.dataclass(frozen=True)
class Mapping(Check):
    """A dict whose keys pass ``key`` and values pass ``value``."""

    key: Check
    value: Check

    def ok(self, value: Any) -> bool:
        return isinstance(value, dict) and all(self.key.ok(k) and self.value.ok(v) for k, v in value.items())

    def describe(self) -> str:
        return f"a mapping of ({self.key.describe()}) to ({self.value.describe()})"

    def bad_examples(self) -> list[Any]:
        good_key = self.key.values()[-1] if isinstance(self.key, OneOf) else "k"
        return [{self.key.bad_examples()[0]: 50}, {good_key: self.value.bad_examples()[-1]}]


@dataclasses.dataclass(frozen=True)
class Maybe(Check):
    """``None`` (the field's 'automatic' setting) or a value passing ``check``."""

    check: Check

    def ok(self, value: Any) -> bool:
        return value is None or self.check.ok(value)

    def describe(self) -> str:
        return f"null or {self.check.describe()}"

    def bad_examples(self) -> list[Any]:
        return self.check.bad_examples()


@dataclasses.dataclass(frozen=True)
class Anything(Check):
    """Deliberately free-form (``extra``: experiments' own knobs). Declared, so it is a decision, not an omission."""

    why: str

    def ok(self, value: Any) -> bool:
        return True

    def describe(self) -> str:
        return self.why

    def bad_examples(self) -> list[Any]:
        return []


@dataclasses.dataclass(frozen=True)
class Block(Check):
    """An rl-games network sub-block (``network.cnn``, ``network.rnn``): empty, or a mapping of its known keys."""

    keys: tuple[str, ...]
    what: str

    def ok(self, value: Any) -> bool:
        return isinstance(value, dict) and set(value) <= set(self.keys)

    def describe(self) -> str:
        return f"empty (no {self.what}) or a mapping with keys among {', '.join(self.keys)}"

    def bad_examples(self) -> list[Any]:
        return [{"bogus": 1}]


@dataclasses.dataclass(frozen=True)
class Settings(Block):
    """A mapping of known keys, some of which only one value of works (``fixed``: key -> (value, why))."""

    fixed: tuple[tuple[str, Any, str], ...] = ()

    def ok(self, value: Any) -> bool:
        return super().ok(value) and all(value.get(k, v) == v for k, v, _ in self.fixed)

    def describe(self) -> str:
        only = "; ".join(f"{k} only {v} ({why})" for k, v, why in self.fixed)
        return f"{super().describe()}; {only}" if only else super().describe()

    def bad_examples(self) -> list[Any]:
        return [*super().bad_examples(), *({k: not v} for k, v, _ in self.fixed if isinstance(v, bool))]


@dataclasses.dataclass(frozen=True)
class Kwargs(Check):
    """Keyword arguments passed through to a library (``task.env_config``): identifier keys, none of ``reserved``."""

    reserved: tuple[str, ...]
    what: str

    def ok(self, value: Any) -> bool:
        return isinstance(value, dict) and all(
            isinstance(k, str) and k.isidentifier() and k not in self.reserved for k in value)

    def describe(self) -> str:
        return f"a mapping of {self.what} keyword arguments, none of {', '.join(self.reserved)} (set by gmiexp)"

    def bad_examples(self) -> list[Any]:
        return [{self.reserved[0]: 1}, {"not a name": 1}]


@dataclasses.dataclass(frozen=True)
class Initializer(Check):
    """An rl-games initializer spec: a mapping whose ``name`` is one of rl-games' registered initializers."""

    names: tuple[str, ...] = ("default", "const_initializer", "orthogonal_initializer", "glorot_normal_initializer",
                              "glorot_uniform_initializer", "variance_scaling_initializer",
                              "random_uniform_initializer", "kaiming_normal", "orthogonal")

    def ok(self, value: Any) -> bool:
        if not (isinstance(value, dict) and value.get("name") in self.names):
            return False
        takes = INITIALIZER_KWARGS.get(value["name"])  # rl-games passes the rest to torch's init function
        return takes is None or set(value) - {"name"} <= takes

    def describe(self) -> str:
        kwargs = "; ".join(f"{n} takes {', '.join(sorted(k)) or 'nothing more'}"
                           for n, k in INITIALIZER_KWARGS.items())
        return f"a mapping {{name: ...}} with name one of {', '.join(self.names)} ({kwargs})"

    def bad_examples(self) -> list[Any]:
        return [{"name": "nope"}, {}, {"name": "const_initializer", "value": 0}]


#: the keyword arguments torch's init function behind each rl-games initializer accepts (``default`` ignores them);
#: a file whose keys are not among them fails inside rl-games' network builder (e.g. ``const_initializer``'s
#: ``value`` instead of ``val``: ``constant_() got an unexpected keyword argument 'value'``)
INITIALIZER_KWARGS = {
    "const_initializer": {"val"}, "orthogonal_initializer": {"gain"}, "orthogonal": {"gain"},
    "glorot_normal_initializer": {"gain"}, "glorot_uniform_initializer": {"gain"},
    "variance_scaling_initializer": {"mode", "scale"}, "random_uniform_initializer": {"a", "b"},
    "kaiming_normal": {"a", "mode", "nonlinearity"},
}


@dataclasses.dataclass(frozen=True)
class Pair(Check):
    """A range ``[lo, hi]``: two numbers, each within ``within``, the first no larger than the second."""

    within: Between

    def ok(self, value: Any) -> bool:
        return (isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2
                and all(self.within.ok(v) for v in value) and value[0] <= value[1])

    def describe(self) -> str:
        return f"a pair [lo, hi] with lo <= hi, each {self.within.describe()}"

    def bad_examples(self) -> list[Any]:
        a = (self.within.lo or 0) + 1
        return [[a + 1, a], [a], *([[b, a]] for b in self.within.bad_examples()[-1:])]


@dataclasses.dataclass(frozen=True)
class Section(Check):
    """A nested section of the schema ``schema`` (a config group that is off by default, e.g. ``pbt``)."""

    schema: str
    options: str

    def ok(self, value: Any) -> bool:
        return dataclasses.is_dataclass(value) and type(value).__name__ == self.schema

    def describe(self) -> str:
        return f"one of {self.options} (null: off)"

    def bad_examples(self) -> list[Any]:
        return ["nope"]


def ranges(**checks: Check) -> Callable[[type], type]:
    """Class decorator declaring the valid range of each field of a config schema."""

    def attach(cls: type) -> type:
        setattr(cls, RANGES_ATTR, {**getattr(cls, RANGES_ATTR, {}), **checks})
        return cls

    return attach


def declared(schema: type) -> dict[str, Check]:
    return dict(getattr(schema, RANGES_ATTR, {}))


def undeclared(schema: type) -> list[str]:
    """Fields of ``schema`` with neither a declared range nor a self-describing type (bool, nested schema)."""
    checks = declared(schema)
    return [f.name for f in dataclasses.fields(schema)
            if f.name not in checks and f.type not in ("bool", bool) and not _is_schema(f.type)]


def _is_schema(annotation: Any) -> bool:
    return isinstance(annotation, str) and annotation.endswith("Config") and annotation[:1].isupper()


def validate(node: Any, prefix: str = "") -> None:
    """Check every field of ``node`` (a schema instance) and its nested schemas; refuse every violation at once.

    One reason is raised as it is; several, one a line under their count, so that a command with three bad values
    is mended in one go. Sections declared with :func:`all_at_once` (``pbt``) add their cross-field reasons too.
    """
    found = reasons(node, prefix)
    if found:
        sections = {section for section, _ in found}
        what = f"{sections.pop()} settings" if len(sections) == 1 and "" not in sections else "settings"
        raise refusal([reason for _, reason in found], what)


def reasons(node: Any, prefix: str = "") -> list[tuple[str, str]]:
    """(section, ``invalid <path>: <value>; valid: ...``) for every field out of range, in the schema's order.

    ``section`` names an :func:`all_at_once` section (its reasons include its cross-field checks), else is empty.
    """
    out: list[tuple[str, str]] = []
    bad = violations(node, prefix)
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        path = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            if hasattr(type(value), ALL_AT_ONCE_ATTR):
                out += [(path, reason) for reason in section_reasons(value, f"{path}.")]
            else:
                out += reasons(value, f"{path}.")
        elif f.name in bad:
            out.append(("", bad[f.name]))
    return out


ALL_AT_ONCE_ATTR = "__all_at_once__"

#: (section, its dotted prefix, the fields already refused) -> the reasons it is refused beyond its fields' ranges
#: ("invalid <key>: ..." lines)
CrossCheck = Callable[[Any, str, set[str]], list[str]]


def all_at_once(cross: CrossCheck | None = None) -> Callable[[type], type]:
    """Class decorator: refuse the section with every reason at once, its fields' ranges and then ``cross``.

    ``cross`` checks what one field's range cannot say (keys against each other); it is told which fields are out of
    range already, and leaves out what depends on them.
    """

    def attach(cls: type) -> type:
        setattr(cls, ALL_AT_ONCE_ATTR, cross)
        return cls

    return attach


def violations(node: Any, prefix: str = "") -> dict[str, str]:
    """Field name -> ``invalid <path>: <value>; valid: ...`` for every field of ``node`` outside its declared range."""
    checks = declared(type(node))
    out = {}
    for f in dataclasses.fields(node):
        value, check = getattr(node, f.name), checks.get(f.name)
        if check is not None and not check.ok(value):
            out[f.name] = str(invalid(f"{prefix}{f.name}", value, check.describe()))
    return out


def section_reasons(node: Any, prefix: str) -> list[str]:
    """An :func:`all_at_once` section's reasons: its fields' ranges, then its cross-field checks."""
    bad = violations(node, prefix)
    cross = getattr(type(node), ALL_AT_ONCE_ATTR)
    return list(bad.values()) + (cross(node, prefix, set(bad)) if cross is not None else [])


def unknown_keys(cfg: DictConfig, schema: type, prefix: str = "") -> list[tuple[str, list[str]]]:
    """Keys in ``cfg`` its schema does not declare, each with the schema's fields.

    Hydra's ``+key=value`` adds a key past the schema's struct flag, and ``OmegaConf.to_object`` then drops it
    silently; a typo made that way must be refused like any other.
    """
    names = {f.name for f in dataclasses.fields(schema)}
    out = []
    for key in cfg:
        path = f"{prefix}{key}"
        if key not in names:
            out.append((path, sorted(names)))
            continue
        child = cfg._get_node(key)  # the node itself, so its schema type is kept
        child_type = OmegaConf.get_type(child) if isinstance(child, DictConfig) else None
        if child_type is not None and dataclasses.is_dataclass(child_type):
            out += unknown_keys(child, child_type, f"{path}.")
    return out


def check_keys(cfg: DictConfig, schema: type) -> None:
    """Refuse (exit 2) every key ``schema`` does not declare, at once, each with the keys valid where it stands."""
    hint = "a new key needs a field in its schema (src/gmiexp/config/schema.py)"
    found = [str(invalid("key", path, valid, hint)) for path, valid in unknown_keys(cfg, schema)]
    if found:
        raise refusal(found, "keys")
