"""Imported by the warm-start server only (:mod:`gmiexp.launch.warm`), never by the launcher or a GMI.

The fork server imports this module, then forks every warm GMI from itself. So it records the server's
environment (a forked GMI takes what elastic set for its rank as the difference), points the server's stdout
at stderr (an import's message must not reach the launcher's stdout, which carries only program output; a GMI's
own stdout goes to its log), and imports what every GMI imports: torch and gmiexp's worker. The role's trainer
(rl-games, rsl_rl) and the simulator are the server's next preloads (:func:`gmiexp.launch.warm.preloads`).
Nothing here touches a device.
"""

from __future__ import annotations

import atexit
import os
import sys

SERVER_ENV = dict(os.environ)
SERVER_PID = os.getpid()


def _end_without_teardown() -> None:
    """The server's last exit handler: leave without the interpreter's teardown of what it imported.

    Tearing down torch, the trainer and the simulator took 2-3 s of CPU on a 2-core host, spent after the launcher
    had exited, while the next run starts. The server holds nothing to flush or release. Its forked GMIs inherit
    the handler but are not its pid (and a forked child ends with ``os._exit`` anyway).
    """
    if os.getpid() == SERVER_PID:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


atexit.register(_end_without_teardown)  # the first registered of the trainer's and simulator's: it runs last

sys.stdout.flush()
os.dup2(2, 1)

try:
    import torch  # noqa: F401

    import gmiexp.launch.worker  # noqa: F401
except ImportError:  # a GMI then imports what is missing itself, and reports it
    pass
