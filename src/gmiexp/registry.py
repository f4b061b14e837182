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
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from gmiexp.errors import invalid

T = TypeVar("T")


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
        """The variant registered as ``name``; ConfigError (exit 2) listing the valid names otherwise."""
        entries = self._filled()
        if name not in entries:
            raise invalid(self.kind, name, self.names())
        obj = entries[name]
        if isinstance(obj, str):
            module, attr = obj.split(":")
            obj = getattr(importlib.import_module(module), attr)
            entries[name] = obj
        return obj  # type: ignore[return-value]

    def names(self) -> tuple[str, ...]:
        """The registered names, sorted (registration order follows the import graph, which is no order)."""
        return tuple(sorted(self._filled()))

    def __contains__(self, name: object) -> bool:
        return name in self._filled()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"
