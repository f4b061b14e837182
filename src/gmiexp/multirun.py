"""State of one ``python -m gmiexp -m`` sweep shared by the entry point and the launchers.

A failed job does not stop a sweep: the launcher that ran it (Hydra's basic launcher through the task
function, or the ``gmiexp_pack`` launcher) records its directory here, and ``main()`` exits 1 naming
every one once the sweep is over. ``ran`` tells a config error (Hydra exits 1 before any job ran;
gmiexp says 2) from a failure later on. A module of its own, so ``python -m gmiexp`` (module
``__main__``) and the launcher plugin see the same object.
"""

from __future__ import annotations

import sys

state: dict = {"ran": False, "failed": []}


def record_failure(run_dir: str) -> None:
    state["failed"].append(str(run_dir))


def exit_code() -> int:
    """1 (after naming the failed jobs on stderr) if any job failed, else 0."""
    failed = state["failed"]
    if not failed:
        return 0
    print(f"gmiexp: {len(failed)} multirun job(s) failed: {', '.join(failed)}", file=sys.stderr, flush=True)
    return 1
