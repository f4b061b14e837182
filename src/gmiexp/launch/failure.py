"""Which GMI failure is the root cause, and how the error names it.

When one GMI dies, its peers fail at once in their next collective (gloo: "Connection closed by peer"), on
every node. Those are secondary failures: a worker whose exception is a torch.distributed communication error
exits with :data:`COMM_EXIT_CODE`, a worker whose launcher vanished with the lifeline's code. GMIs a launcher
killed itself (still running when another node failed) are secondary too, and so are those elastic stopped
with SIGTERM after the first failure (it lists them among the failures "for bookkeeping"). The error names the
earliest root failure; only when no node reports one does it fall back to the earliest secondary failure. A root
GMI that exited 2 refused its input (:data:`gmiexp.errors.REFUSED_EXIT_CODE`): the run's error is then bad input.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gmiexp.errors import REFUSAL_PREFIX, REFUSED_EXIT_CODE, LaunchError, RefusedInGmi
from gmiexp.launch import lifeline
from gmiexp.shm.names import SHM_DIR
from gmiexp.shm.segment import amount, free_shm_bytes

COMM_EXIT_CODE = 71  # the worker failed in a collective or a store call: a consequence of another failure
SECONDARY_EXIT_CODES = (COMM_EXIT_CODE, lifeline.EXIT_CODE, -signal.SIGTERM)
_COMM_TEXT = re.compile(r"gloo|Connection (closed|reset) by peer|Broken pipe|Connection refused|"
                        r"monitoredBarrier|Socket Timeout|Failed to recv")


def is_comm_error(exc: BaseException | None) -> bool:
    """True when ``exc`` (or what it was raised from) is a torch.distributed communication error."""
    import torch.distributed as dist

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, dist.DistError) or (isinstance(exc, RuntimeError) and _COMM_TEXT.search(str(exc))):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@dataclass
class Failure:
    """One failed GMI as a node reports it to the others."""

    node: int
    gmi: int
    head: str  # "GMI 3 on node 1 failed (exit code -9)"
    tail: str  # its log tail
    secondary: bool
    time: float
    refusal: str = ""  # a GMI that refused its config (exit 2): its reason, the CLI's "gmiexp: error:" text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def where(gmi: int, node: int, nnodes: int) -> str:
    """"GMI 3 on node 1", or "GMI 3" in a one-node run (messages as they always were)."""
    return f"GMI {gmi} on node {node}" if nnodes > 1 else f"GMI {gmi}"


def log_tail(run_dir: Path, local_rank: int, lines: int = 25) -> str:
    """Last lines of a GMI's captured stderr+stdout (elastic writes <log_dir>/<run>/attempt_0/<local rank>/)."""
    chunks = []
    for name in ("stderr.log", "stdout.log"):
        for p in sorted((run_dir / "logs").glob(f"*/attempt_*/{local_rank}/{name}")):
            text = p.read_text(errors="replace").splitlines()
            if text:
                chunks.append(f"--- {p.relative_to(run_dir)} (last {min(lines, len(text))} lines) ---")
                chunks.extend(text[-lines:])
    return "\n".join(chunks) or "(no log output)"


def exception(run_dir: Path, local_rank: int, limit: int = 400) -> str:
    """The exception a GMI's last traceback ended with (``ShmFull: [Errno 28] ...``), "" if it printed none.

    Its log's tail is mostly the trainer's own prints after it (rl-games' stdout), so the failure's head names it.
    """
    for p in sorted((run_dir / "logs").glob(f"*/attempt_*/{local_rank}/stderr.log")):
        lines = p.read_text(errors="replace").splitlines()
        starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last):")]
        if starts:
            raised = next((ln for ln in lines[starts[-1] + 1:] if ln and not ln[0].isspace()), "")
            return raised if len(raised) <= limit else raised[:limit] + " ..."
    return ""


def refusal(run_dir: Path, local_rank: int) -> str:
    """The reason a GMI that exited 2 printed last (:data:`gmiexp.errors.REFUSAL_PREFIX`), "" if none."""
    for p in sorted((run_dir / "logs").glob(f"*/attempt_*/{local_rank}/stderr.log")):
        said = [ln for ln in p.read_text(errors="replace").splitlines() if ln.startswith(REFUSAL_PREFIX)]
        if said:
            return said[-1].removeprefix(REFUSAL_PREFIX)
    return ""


def process_failures(err: Exception, gmi_of_local_rank: dict[int, int], node: int, nnodes: int, run_dir: Path,
                     killed: Collection[int] | bool) -> list[Failure]:
    """Elastic's ChildFailedError as Failures; ``killed``: pids this launcher killed (True: all of them)."""
    out = []
    for f in (getattr(err, "failures", {}) or {}).values():
        gmi = gmi_of_local_rank.get(f.local_rank, f.local_rank)
        pid = f", pid {f.pid}" if nnodes == 1 else ""
        why = f": {bus_error()}" if f.exitcode == -signal.SIGBUS else ""
        if f.exitcode == 1 and (raised := exception(run_dir, f.local_rank)):
            why = f": {raised}"
        out.append(Failure(node=node, gmi=gmi,
                           head=f"{where(gmi, node, nnodes)} failed (exit code {f.exitcode}{pid}){why}",
                           tail=log_tail(run_dir, f.local_rank), time=float(f.timestamp),
                           refusal=refusal(run_dir, f.local_rank) if f.exitcode == REFUSED_EXIT_CODE else "",
                           secondary=killed is True or (killed is not False and f.pid in killed)
                           or f.exitcode in SECONDARY_EXIT_CODES))
    return out


def bus_error() -> str:
    """What a SIGBUS in a GMI means here: a page of a shared-memory segment that /dev/shm could not supply."""
    try:
        free = f"{amount(free_shm_bytes(SHM_DIR))} free now"
    except OSError:
        free = "its free space unknown"
    return (f"bus error: {SHM_DIR} ran out of space under a shared-memory segment ({free}); give the run more "
            "shared memory (docker run --shm-size=...) or smaller channel.*")


def root_cause(failures: list[Failure]) -> Failure | None:
    """The earliest root failure, else the earliest secondary one (None when there is none)."""
    if not failures:
        return None
    return min(failures, key=lambda f: (f.secondary, f.time, f.node, f.gmi))


def describe(failures: list[Failure], nnodes: int, cause: str | None = None, node_gone: bool = False) -> str | None:
    """The error of a failed launch: its root failure with log tail, or None when nothing is known.

    ``cause`` (a node found gone, when ``node_gone``) wins over secondary failures.
    """
    everyone = "every GMI on every node was stopped" if nnodes > 1 else "every GMI was stopped"
    root = root_cause(failures)
    if root is not None and (not root.secondary or not (cause and node_gone)):
        return f"{root.head}; {everyone}\n{root.tail}"
    if cause:
        return f"{cause}; {everyone}"
    return None


def run_error(failures: list[Failure], nnodes: int, cause: str | None = None, node_gone: bool = False,
              fallback: str = "") -> LaunchError | RefusedInGmi:
    """The failed launch's error: a root GMI's refusal of its config as bad input (exit 2), else a LaunchError."""
    msg = describe(failures, nnodes, cause, node_gone) or fallback
    root = root_cause(failures)
    if root is not None and root.refusal and msg.startswith(root.head):
        who = root.head.split(" failed", 1)[0]
        everyone = "every GMI on every node was stopped" if nnodes > 1 else "every GMI was stopped"
        return RefusedInGmi(f"{root.refusal} ({who} refused it at start and exited 2; {everyone})")
    return LaunchError(msg)
