"""Errors the user can fix; the CLI turns them into exit code 2 before anything is launched."""

from __future__ import annotations

import errno
from collections.abc import Iterable


class GmiexpError(Exception):
    """Base class of gmiexp's own errors."""


class ConfigError(GmiexpError, ValueError):
    """Bad input: a config value, a layout, or a hardware mismatch.

    The message names the bad value and what would be valid, so the CLI can
    print it as is and exit with code 2.
    """

    exit_code = 2

    def __init__(self, message: str, reasons: Iterable[str] = ()) -> None:
        super().__init__(message)
        #: the reasons one at a time (a sweep names the members that hold each); the message alone when not given
        self.reasons = list(reasons) or [message]


def refusal(reasons: list[str], what: str) -> ConfigError:
    """Every reason at once: one as it is, several one a line under their count (``N invalid <what> ...``)."""
    if len(reasons) == 1:
        return ConfigError(reasons[0])
    return listed(f"{len(reasons)} invalid {what} (nothing was launched)", reasons)


def listed(header: str, lines: list[str], prefix: str = "") -> ConfigError:
    """Several problems, one a line under ``header``; each alone (``reasons``), as ``<prefix>: <line>`` if given.

    A file's or a task's refusal: the message reads as one, a sweep names each problem with the members it holds for.
    """
    reasons = [f"{prefix}: {line}" for line in lines] if prefix else list(lines)
    return ConfigError(f"{header}:\n  " + "\n  ".join(lines), reasons)


def by_member(reasons: dict[str, list[int]], done: str) -> ConfigError:
    """A sweep's refusals: each reason once, naming every member that holds it (``(members #0, #2; <done>)``).

    The message is one CLI error line a reason, as a sweep prints it; ``reasons`` holds the lines.
    """
    lines = [f"{reason} (member{'s' * (len(ms) > 1)} {', '.join(f'#{m}' for m in ms)}; {done})"
             for reason, ms in reasons.items()]
    return ConfigError(f"\n{REFUSAL_PREFIX}".join(lines), lines)


class RefusedInGmi(ConfigError):
    """Bad input only a GMI could see (a module it imports, a checkpoint's tensors): it exited 2, the run stopped.

    Unlike a ConfigError before launch, processes ran and the run dir holds their logs and a failed summary.
    """


#: a GMI's exit code for a ConfigError it raised (the CLI's own for bad input): the launcher's cue for RefusedInGmi
REFUSED_EXIT_CODE = 2
#: the line a refusing GMI prints last: the CLI's, so its log reads as the command line's would
REFUSAL_PREFIX = "gmiexp: error: "


class LaunchError(GmiexpError, RuntimeError):
    """A launched run failed (a GMI died or hung)."""

    exit_code = 1


def invalid(what: str, value: object, valid: Iterable[object] | str, hint: str = "") -> ConfigError:
    """Build the canonical "bad value, valid values" error."""
    valid_txt = valid if isinstance(valid, str) else ", ".join(str(v) for v in valid)
    msg = f"invalid {what}: {value!r}; valid: {valid_txt}"
    if hint:
        msg += f". {hint}"
    return ConfigError(msg)


class Interrupted(GmiexpError):
    """Ctrl-C or SIGTERM: every GMI was stopped; ``summary``: what was trained until then (None before launch)."""

    exit_code = 130

    def __init__(self, message: str, summary: dict | None = None) -> None:
        super().__init__(message)
        self.summary = summary

#: errors of the file system a run writes to (not of gmiexp): full, over quota, read-only, not writable
FS_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
             errno.EROFS: "read-only file system", errno.EACCES: "permission denied"}


def fs_problem(exc: BaseException) -> str | None:
    """``exc`` (or what it was raised from) as "<path>: <what>" when a file system refused a write, else None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in FS_ERRNOS:
            path = exc.filename if exc.filename is not None else "a file"
            return f"{path}: {FS_ERRNOS[exc.errno]} ([Errno {exc.errno}])"
        exc = exc.__cause__ or exc.__context__
    return None
