"""Refuse a misspelt ``key=value`` override before Hydra does, naming the valid keys.

Hydra answers an unknown key with "To append to your config use +key=value", and that then fails again on
gmiexp's typed schema. Here every plain override's dotted key is looked up in the schema dataclasses (each
backend option's own fields included); config groups, ``hydra.*``, ``+``/``~`` overrides and flags are left
to Hydra.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Sequence
from typing import Any

from gmiexp.config.compose import conf_dir
from gmiexp.config.mjlab_tasks import check_task_override
from gmiexp.config.schema import BACKEND_SCHEMAS, GROUP_SCHEMAS, BackendConfig, Config
from gmiexp.errors import ConfigError, invalid


def _fields(schema: type) -> dict[str, Any]:
    return typing.get_type_hints(schema)


def _schemas_for(root: type, name: str, hint: Any) -> list[type] | None:
    """The dataclasses a field's value may be (None: anything goes below it, e.g. a dict)."""
    if root.__name__ == "Config" and name in GROUP_SCHEMAS:
        schema = GROUP_SCHEMAS[name]
        return [schema, *BACKEND_SCHEMAS.values()] if schema is BackendConfig else [schema]
    for arg in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(arg):
            return [arg]
    return None


def unknown_key(key: str, root: type) -> ConfigError | None:
    """The error for a dotted ``key`` that no schema declares (None when it is known)."""
    schemas: list[type] | None = [root]
    path = []
    for part in key.split("."):
        if schemas is None:
            return None
        known = {n: h for s in schemas for n, h in _fields(s).items()}
        if part not in known:
            where = ".".join(path)
            close = difflib.get_close_matches(part, list(known), n=1)
            hint = f"did you mean {'.'.join([*path, close[0]])}?" if close else ""
            valid = sorted(known)
            return invalid(f"key{' under ' + where if where else ''}", ".".join([*path, part]), valid, hint)
        schemas = _schemas_for(schemas[0], part, known[part]) if len(schemas) == 1 else \
            next((_schemas_for(s, part, _fields(s)[part]) for s in schemas if part in _fields(s)), None)
        path.append(part)
    return None


def check_overrides(args: Sequence[str]) -> None:
    """Raise ConfigError (exit 2) for the first command-line override whose key the schema lacks.

    A ``task=`` option that is neither a ``conf/task`` file nor an mjlab task id is refused here too, naming both
    (Hydra would list only the files).
    """
    check_task_override(args, conf_dir())
    for arg in args:
        if arg.startswith(("-", "+", "~")) or "=" not in arg:
            continue
        key = arg.split("=", 1)[0]
        if not key or "/" in key or key.split(".")[0] == "hydra" or "@" in key:
            continue
        err = unknown_key(key, Config)
        if err is not None:
            raise err
