"""``python -m gmiexp --help``: every config field, documented from its schema (``hydra.help.template``).

A field's documentation is the comment beside its declaration in :mod:`gmiexp.config.schema` and its declared
range (``@ranges``), so the help cannot drift from the schema.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

from gmiexp.config.checks import declared
from gmiexp.config.schema import BACKEND_SCHEMAS, GROUP_SCHEMAS, BackendConfig, Config

_FIELD = re.compile(r"^\s+(\w+):[^#]*?(?:#\s*(.*))?$")
_COMMENT = re.compile(r"^\s+#\s?(.*)$")


def comments(schema: type) -> dict[str, str]:
    """Field name -> its comment (beside the declaration, else the lines above it), here or in a base schema."""
    out: dict[str, str] = {}
    for cls in reversed(schema.__mro__[:-1]):
        if not dataclasses.is_dataclass(cls):
            continue
        above: list[str] = []
        for line in inspect.getsource(cls).splitlines():
            if c := _COMMENT.match(line):
                above.append(c.group(1).strip())
            elif m := _FIELD.match(line):
                text = (m.group(2) or " ".join(above)).strip()
                if text:
                    out[m.group(1)] = text
                above = []
            else:
                above = []
    return out


def _default(f: dataclasses.Field) -> object:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return "???"


def describe(schema: type, prefix: str, only: set[str] | None = None) -> list[str]:
    """One line per field: ``prefix.field=default  comment [valid: range]`` (nested schemas left out)."""
    docs, checks, lines = comments(schema), declared(schema), []
    for f in dataclasses.fields(schema):
        if only is not None and f.name not in only:
            continue
        value = _default(f)
        if dataclasses.is_dataclass(value) or isinstance(f.type, str) and f.type.endswith("Config"):
            continue
        value = getattr(value, "value", value)  # an enum member: its string
        if isinstance(value, bool) or value is None:
            value = {True: "true", False: "false", None: "null"}[value]
        text = f"  {prefix}{f.name}={value}"
        note = docs.get(f.name, "")
        valid = checks[f.name].describe() if f.name in checks else ("true | false" if f.type == "bool" else "")
        if valid and valid not in note:
            note = f"{note} [valid: {valid}]" if note else f"[valid: {valid}]"
        lines.append(f"{text}  {note}".rstrip())
    return lines


def help_text() -> str:
    """The fields of the top level, of each group (each backend option's own), and of the nested sections."""
    out = ["top level:", *describe(Config, "")]
    for group, schema in GROUP_SCHEMAS.items():
        out += ["", f"{group} ({(schema.__doc__ or '').strip()}):", *describe(schema, f"{group}.")]
        if schema is BackendConfig:
            common = {f.name for f in dataclasses.fields(BackendConfig)}
            for option, sub in BACKEND_SCHEMAS.items():
                own = {f.name for f in dataclasses.fields(sub)} - common
                if option != "auto" and own:
                    out += [f" backend={option} only:", *describe(sub, "backend.", own)]
            out.append(" backend=auto accepts every option's fields and passes them to the one it picks.")
    for name in ("launch", "batch", "async_train", "eval"):
        schema = {f.name: f for f in dataclasses.fields(Config)}[name].default_factory  # type: ignore[assignment]
        out += ["", f"{name} ({(schema.__doc__ or '').strip()}):", *describe(schema, f"{name}.")]
    return "\n".join(out).replace("$", "$$")  # Hydra fills the template with string.Template
