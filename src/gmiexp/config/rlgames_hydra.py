"""Hydra interpolations in rl-games agent files written for IsaacGymEnvs (``cfg/train/<Task>PPO.yaml``).

IsaacGymEnvs composes its agent file under ``train`` beside its own top-level keys and resolves
``${...seed}``, ``${....task.env.numEnvs}``, ``${resolve_default:Ant,${....experiment}}`` and
``${if:${...checkpoint},True,False}`` with resolvers it registers itself. gmiexp resolves these
here, without registering anything with OmegaConf (IsaacGymEnvs, imported later by the isaacgym
simulator, registers its own resolvers under the same names and would refuse duplicates):

* a path into IsaacGymEnvs' own top-level keys that gmiexp has too (``seed``, ``checkpoint``,
  ``task.env.numEnvs`` -> ``num_envs``, ``max_iterations``) becomes :class:`Follows`: the key keeps
  gmiexp's value (its default, or the command line), exactly as IsaacGymEnvs' launcher fills it in;
* ``experiment`` is IsaacGymEnvs' unset default ``''``, so ``resolve_default`` yields its default;
* a path inside the file resolves to that value; anything else is refused by name (exit 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gmiexp.errors import ConfigError


@dataclass(frozen=True)
class Follows:
    """A value the launcher supplies: gmiexp's own key of the same meaning."""

    key: str  # the gmiexp key, e.g. "num_envs"

    def __str__(self) -> str:
        return f"<gmiexp's {self.key}>"


#: IsaacGymEnvs' top-level keys an agent file may point at -> what gmiexp uses for them
IGE_ROOT: dict[str, Any] = {
    "seed": Follows("seed"),
    "checkpoint": Follows("checkpoint"),
    "task.env.numEnvs": Follows("num_envs"),
    "max_iterations": "",  # IsaacGymEnvs' default; resolve_default then keeps the file's max_epochs
    "experiment": "",  # IsaacGymEnvs' default; resolve_default then keeps the file's name
}
RESOLVERS = ("resolve_default", "if", "eq")
_INNER = re.compile(r"\$\{([^${}]*)\}")  # an innermost interpolation


def has_interpolation(node: Any) -> bool:
    if isinstance(node, dict):
        return any(has_interpolation(v) for v in node.values())
    if isinstance(node, list):
        return any(has_interpolation(v) for v in node)
    return isinstance(node, str) and "${" in node


def resolve(doc: dict[str, Any], path: str) -> dict[str, Any]:
    """``doc`` (a whole agent file: ``{params: ...}``) with every interpolation resolved, or ConfigError."""
    root = {"train": doc}

    def lookup(expr: str, where: tuple[str, ...]) -> Any:
        dots = len(expr) - len(expr.lstrip("."))
        parts = expr.lstrip(".").split(".")
        # relative: one dot is the node holding the key, each more dot one level up; none: from the root
        base = (list(where[: len(where) - dots]) if dots <= len(where) else None) if dots else []
        if base is None:
            raise ConfigError(f"invalid interpolation ${{{expr}}} in {path}: it points above the file's root")
        if not base and ".".join(parts) in IGE_ROOT:
            return IGE_ROOT[".".join(parts)]
        node: Any = root
        for p in [*base, *parts]:
            if not isinstance(node, dict) or p not in node:
                known = ", ".join(sorted(IGE_ROOT))
                raise ConfigError(f"invalid interpolation ${{{expr}}} at {'.'.join(where)} in {path}: it names "
                                  f"neither a key of the file nor an IsaacGymEnvs key gmiexp supplies ({known})")
            node = node[p]
        return resolve_value(node, tuple([*base, *parts]))

    def call(name: str, args: list[Any], where: tuple[str, ...]) -> Any:
        if name == "resolve_default":  # IsaacGymEnvs: the default unless the argument is set
            default, arg = args
            return default if arg in ("", None) else arg
        if name == "if":
            cond, yes, no = args
            if isinstance(cond, Follows):  # load_checkpoint follows gmiexp's checkpoint=
                return cond
            return yes if cond else no
        if name == "eq":
            return str(args[0]).lower() == str(args[1]).lower()
        raise ConfigError(f"invalid resolver ${{{name}:...}} at {'.'.join(where)} in {path}: gmiexp resolves "
                          f"IsaacGymEnvs' {', '.join(RESOLVERS)} and paths to keys")

    def resolve_value(value: Any, where: tuple[str, ...]) -> Any:
        if isinstance(value, dict):
            return {k: resolve_value(v, (*where, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve_value(v, where) for v in value]
        if not isinstance(value, str) or "${" not in value:
            return value
        found: dict[str, Any] = {}
        text = value
        while (m := _INNER.search(text)) is not None:
            body = m.group(1).strip()
            name, colon, rest = body.partition(":")
            if colon and re.fullmatch(r"[A-Za-z_][\w.]*", name):
                args = [found.get(a.strip(), _scalar(a.strip())) for a in rest.split(",")]
                got = call(name, args, where)
            else:
                got = lookup(body, where)
            token = f"\x00{len(found)}\x00"
            found[token] = got
            text = text[: m.start()] + token + text[m.end():]
        if text in found:  # the whole string was one interpolation: keep the value's type
            return found[text]
        for token, got in found.items():
            text = text.replace(token, str(got))
        return text

    return resolve_value(doc, ("train",))


def _scalar(text: str) -> Any:
    """A resolver argument as Hydra reads it: bool, int, float or the text itself."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
