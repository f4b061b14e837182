"""One registry mechanism for every variant gmiexp picks by name (layouts, backends, reductions, ...).

In the spirit of rl-games' ``ObjectFactory``: a variant is one module that registers itself with a
decorator, so adding one touches that module (and its YAML), never an if/elif elsewhere::

    @LAYOUTS.register("tcg_ex")
    class TCGEx(Layout): ...

``load`` names the package whose import fills the registry (its ``__init__`` imports the variant
modules); it is imported on the first lookup, so defining a registry stays cheap. A variant whose
module is heavy (rl-games, torch) is added as ``"module:attr"`` text with :meth:`Registry.add`
and imported only by :meth:`Registry.get`, so ``mode=plan`` knows its name without importing it.
Iterating a registry yields its names, which is what ``OneOf(registry="module:ATTR")`` reads.

A variant outside gmiexp needs no registration at all: ``get`` (and ``knows``) also take ``"module:attr"`` as
the name itself (``layout.name=my_layouts:MyLayout``, as ``role=my_roles:MyRole``), imported where it is looked
up. So it reaches the GMI processes too (a reduction, a simulator), which import only gmiexp's own variants.
Such a name was never registered: ``in`` and :meth:`names` leave it out.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from gmiexp.errors import ConfigError, invalid

T = TypeVar("T")

#: ``package.module:attr``: a variant named by where it lives rather than by a registered name
SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def is_spec(name: object) -> bool:
    """``name`` is ``"module:attr"`` text (a variant :meth:`Registry.get` imports, registered or not)."""
    return isinstance(name, str) and SPEC.fullmatch(name) is not None


def import_spec(spec: str, kind: str, valid: str) -> Any:
    """The object ``"module:attr"`` names; ConfigError (exit 2) naming ``kind``, ``spec`` and ``valid`` otherwise.

    The one home of importing what a user names as ``module:attr``: registries' variants, roles, ``task.vec_env``.
    """
    module, sep, attr = spec.partition(":")
    if not (module and sep and attr):
        raise ConfigError(f"invalid {kind}: {spec!r}; valid: {valid}")
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(f"invalid {kind}: {spec!r}; cannot import module {module!r} ({e})") from e
    if not hasattr(mod, attr):
        raise ConfigError(f"invalid {kind}: {spec!r}; module {module!r} has no {attr!r}; valid: {valid}")
    return getattr(mod, attr)


class Registry(Generic[T]):
    """Names -> variants of one kind; ``get`` of an unknown name exits 2 naming the valid ones."""

    def __init__(self, kind: str, load: str | None = None) -> None:
        self.kind = kind
        self._load = load
        self._entries: dict[str, T | str] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: register the decorated class or function under ``name`` (a later one replaces it)."""
        def deco(obj: T) -> T:
            self._entries[name] = obj
            return obj

        return deco

    def add(self, name: str, target: str) -> None:
        """Register ``"module:attr"``, imported on the first :meth:`get` (keeps heavy variants lazy)."""
        self._entries[name] = target

    def unregister(self, name: str) -> None:
        """Drop ``name`` (tests that register a variant of their own clean up with it)."""
        self._entries.pop(name, None)

    def _filled(self) -> dict[str, T | str]:
        if self._load is not None:
            importlib.import_module(self._load)
        return self._entries

    def get(self, name: str) -> T:
        """The variant registered as ``name``, or the ``"module:attr"`` it names; ConfigError (exit 2) otherwise."""
        entries = self._filled()
        if name not in entries:
            if is_spec(name):
                return self._import(name)
            raise invalid(self.kind, name, self.names())
        obj = entries[name]
        if isinstance(obj, str):
            module, attr = obj.split(":")
            obj = getattr(importlib.import_module(module), attr)
            entries[name] = obj
        return obj  # type: ignore[return-value]

    def _import(self, spec: str) -> T:
        """The object ``"module:attr"`` names (not added to the registry: :meth:`names` lists registered ones)."""
        return import_spec(  # type: ignore[no-any-return]
            spec, self.kind, f"{', '.join(self.names())}, or <module>:<attr> of a {self.kind} class")

    def module_of(self, name: str) -> str | None:
        """The module that holds ``name``'s variant, not imported (None: not a registered name)."""
        obj = self._filled().get(name)
        if obj is None:
            return None
        return obj.partition(":")[0] if isinstance(obj, str) else getattr(obj, "__module__", None)

    def names(self) -> tuple[str, ...]:
        """The registered names, sorted (registration order follows the import graph, which is no order)."""
        return tuple(sorted(self._filled()))

    def knows(self, name: object) -> bool:
        """``get(name)`` would succeed: a registered name, or ``"module:attr"`` that imports (:meth:`get` says why not).

        ``in`` is narrower: registered names only (what :meth:`names` lists).
        """
        if name in self:
            return True
        if not is_spec(name):
            return False
        try:
            self._import(name)  # type: ignore[arg-type]
        except ConfigError:
            return False
        return True

    def __contains__(self, name: object) -> bool:
        return name in self._filled()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"
