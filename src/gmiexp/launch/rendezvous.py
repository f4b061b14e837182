"""The run's coordination store across nodes: one ``torch.distributed.TCPStore`` on ``launch.rdzv_endpoint``.

Node 0's launcher hosts the server before its elastic agent starts, and every agent's c10d rendezvous
(``rdzv_configs is_host=False``) connects to that same server, so the rendezvous and gmiexp's own keys share one
port. gmiexp's keys live under ``gmiexp/<rdzv_id>/``: a heartbeat counter per node, a failure report per node,
a summary per node. Values are JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gmiexp.errors import LaunchError
from gmiexp.plan import Plan
from gmiexp.planner.nodes import endpoint_host, endpoint_port

if TYPE_CHECKING:
    from torch.distributed import TCPStore


CONNECT_GRACE_S = 2.0  # beyond launch.rdzv_timeout_s, for torch's own timeout to be the one that speaks


class NodeStore:
    """One connection to the run's store, with gmiexp's key names; one per thread (a client is one socket)."""

    def __init__(self, store: TCPStore, run_id: str, endpoint: str) -> None:
        self.store, self.prefix, self.endpoint = store, f"gmiexp/{run_id}", endpoint

    def key(self, kind: str, node: int) -> str:
        return f"{self.prefix}/{kind}/{node}"

    def beat(self, node: int) -> int:
        return int(self.store.add(self.key("beat", node), 1))

    def beats(self, node: int) -> int:
        return int(self.store.add(self.key("beat", node), 0))

    def put(self, kind: str, node: int, value: dict[str, Any]) -> None:
        self.store.set(self.key(kind, node), json.dumps(value, default=str))

    def get(self, kind: str, node: int) -> dict[str, Any] | None:
        """The value, or None when the node has not posted it yet (never blocks)."""
        k = self.key(kind, node)
        if not self.store.check([k]):
            return None
        return json.loads(self.store.get(k))


def store_log(plan: Plan) -> Path:
    """The node's log of its store connections: ``<node run dir>/logs/store.log``."""
    return Path(plan.run_dir) / "logs" / "store.log"


@contextlib.contextmanager
def native_stderr_to(path: Path) -> Iterator[None]:
    """Send what C++ writes to file descriptor 2 (c10d's retry warnings and stack traces) to ``path`` meanwhile.

    A client waiting for a store that is not there yet logs every failed try with a C++ stack trace
    (~40 lines); the node's own one-line error is what its user needs on stderr.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def host(plan: Plan) -> NodeStore:
    """Node 0: serve the store on the endpoint's port (the rendezvous joins it as a client)."""
    return serve(str(plan.launch.rdzv_endpoint), str(plan.launch.rdzv_id), float(plan.launch.rdzv_timeout_s),
                 store_log(plan))


def serve(endpoint: str, run_id: str, timeout_s: float, log: Path) -> NodeStore:
    """Node 0's store on ``endpoint``'s port (a run's launcher, or a population's controller); C++ noise to ``log``."""
    from torch.distributed import TCPStore

    try:
        with native_stderr_to(log):
            store = TCPStore(endpoint_host(endpoint), endpoint_port(endpoint), is_master=True, multi_tenant=True,
                             wait_for_workers=False, timeout=timedelta(seconds=timeout_s))
    except (RuntimeError, ValueError) as e:  # DistNetworkError: the port is taken
        raise LaunchError(f"node 0 cannot serve the rendezvous store on launch.rdzv_endpoint={endpoint}: "
                          f"{str(e).splitlines()[0]}") from None
    return NodeStore(store, run_id, endpoint)


def connect(plan: Plan, timeout_s: float | None = None) -> NodeStore:
    """A client of node 0's store; waits up to ``timeout_s`` (``launch.rdzv_timeout_s``) for node 0 to serve it."""
    timeout_s = float(plan.launch.rdzv_timeout_s) if timeout_s is None else timeout_s
    return join(str(plan.launch.rdzv_endpoint), str(plan.launch.rdzv_id), int(plan.node_rank), timeout_s,
                store_log(plan))


def join(endpoint: str, run_id: str, node: int, timeout_s: float, log: Path) -> NodeStore:
    """A client of node 0's store at ``endpoint``, waiting up to ``timeout_s`` for it; C++ noise to ``log``.

    Bounded whatever listens on the port: torch's client waits forever for the handshake of a server that
    accepts and never answers (not a rendezvous store: a proxy, another program), so the client is built in a
    thread that is left behind (a daemon: it does not keep the process alive) when the time is up.
    """
    from torch.distributed import TCPStore

    ep = endpoint
    cant = (f"node {node} cannot reach node 0's store at launch.rdzv_endpoint={ep} within {timeout_s:g}s "
            "(launch.rdzv_timeout_s; is node 0's launcher running?)")
    deadline = time.monotonic() + timeout_s
    refused = _wait_for_listener(endpoint_host(ep), endpoint_port(ep), deadline)
    if refused is not None:  # nothing listens yet: torch would retry with C++ stack frames on stderr
        raise LaunchError(f"{cant}: {refused}")
    box: dict[str, Any] = {}

    def build() -> None:
        try:
            box["store"] = TCPStore(endpoint_host(ep), endpoint_port(ep), is_master=False,
                                    timeout=timedelta(seconds=timeout_s))
        except (RuntimeError, ValueError) as e:
            box["error"] = e

    t = threading.Thread(target=build, name="gmiexp-store-connect", daemon=True)
    # c10d's C++ frames go to the node's log, not stderr; only while the main thread waits, so its own error
    # line (or a signal's) reaches stderr even when the client thread is left behind
    with native_stderr_to(log):
        t.start()
        t.join(max(0.0, deadline - time.monotonic()) + CONNECT_GRACE_S)
    if t.is_alive():
        raise LaunchError(f"{cant}: something accepts connections on that port but does not answer as a "
                          "rendezvous store (another program on the port?)")
    if "error" in box:
        # torch's message goes on with C++ frames: those stay in the store log
        raise LaunchError(f"{cant}: {str(box['error']).splitlines()[0]} (details: {log})") from None
    return NodeStore(box["store"], run_id, ep)


def _wait_for_listener(host_name: str, port: int, deadline: float) -> str | None:
    """Retry a plain TCP connection until something listens on the port (None) or ``deadline`` (the last error)."""
    last = "nothing listens on that port"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return last
        try:
            with socket.create_connection((host_name, port), timeout=min(2.0, left)):
                return None
        except OSError as e:
            last = f"{e.strerror or e}"
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
