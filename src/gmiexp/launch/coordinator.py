"""Node launchers watching each other through the run's store (:mod:`gmiexp.launch.rendezvous`).

Every launcher beats (a counter per node, so clocks of different hosts never get compared) and watches the
others. It stops its own GMIs, which makes its elastic agent stop and return, when another node

* stays silent longer than ``launch.heartbeat_timeout_s`` (its launcher was killed),
* posts a failure report (one of its GMIs failed: elastic stopped that node's GMIs), or
* is node 0 and its store stops answering (node 0's launcher is gone).

After a failure each launcher posts its own report (its failed GMIs with their log tails), waits briefly for
the others' and names the root cause (:func:`gmiexp.launch.failure.root_cause`), so every node's error names
the same GMI. At the end each node posts its summary; node 0 waits for all of them before it closes the store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from gmiexp.errors import ConfigError, LaunchError, RefusedInGmi
from gmiexp.launch import rendezvous
from gmiexp.launch.failure import Failure, run_error
from gmiexp.plan import Plan
from gmiexp.planner.nodes import disagreement, shared_fields

REPORT_WAIT_S = 5.0  # how long a failed node waits for the other nodes' reports before naming the root cause
VERDICT_READ_S = 5.0  # how long node 0 keeps the store up for the others to read a disagreement


def store_gone(st: rendezvous.NodeStore, err: Exception) -> str:
    return (f"node 0 is gone: its store at launch.rdzv_endpoint={st.endpoint} stopped answering "
            f"({str(err).splitlines()[0][:120]})")


class Coordinator:
    """A node's side of the cross-node watch; ``stop_local`` kills this node's GMIs (elastic then returns)."""

    def __init__(self, plan: Plan, stop_local: Callable[[], None]) -> None:
        self.plan, self.node, self.nnodes = plan, plan.node_rank, plan.nnodes
        self.timeout_s = float(plan.launch.heartbeat_timeout_s)
        self.interval_s = min(0.5, self.timeout_s / 5)
        self.stop_local = stop_local
        self.cause: str | None = None  # why this launcher stopped its GMIs (set once, by the watch thread)
        self.gone: set[int] = set()  # nodes known dead: silent, or node 0 with its store
        self.gone_cause: str | None = None  # how the first of them was found gone
        self.store = rendezvous.host(plan) if self.node == 0 else rendezvous.connect(plan)
        self._done = threading.Event()
        self._failed = False  # this node's own failure is being reported: its GMIs are stopped already
        self._thread: threading.Thread | None = None
        self._reports: dict[int, list[Failure]] = {}  # other nodes' failure reports the watch has read

    @property
    def others(self) -> list[int]:
        return [n for n in range(self.nnodes) if n != self.node]

    # ---- the watch -----------------------------------------------------
    def start(self) -> Coordinator:
        watch_store = rendezvous.connect(self.plan)  # its own connection: a client is one socket
        watch_store.beat(self.node)  # a first beat before the rendezvous, so a node killed while waiting is seen
        self._thread = threading.Thread(target=self._watch, args=(watch_store,), name="gmiexp-nodes", daemon=True)
        self._thread.start()
        return self

    def _watch(self, st: rendezvous.NodeStore) -> None:
        seen = {n: (0, time.monotonic()) for n in self.others}
        while not self._done.wait(self.interval_s):
            try:
                st.beat(self.node)
                for n in self.others:
                    if st.get("summary", n) is not None:
                        continue  # finished: it beats no more
                    rep = st.get("report", n)
                    if rep is not None:  # kept: node 0 may close the store before this node reads it again
                        self._reports.setdefault(n, [Failure(**f) for f in rep["failures"]])
                        self._alarm(f"node {n} reported a failure")
                        continue
                    count, t = seen[n]
                    now = time.monotonic()
                    if st.beats(n) != count:
                        seen[n] = (st.beats(n), now)
                    elif count and now - t > self.timeout_s:
                        self._alarm(f"node {n} is gone: its launcher sent no heartbeat for {now - t:.1f}s "
                                    f"(launch.heartbeat_timeout_s={self.timeout_s:g})", gone=n)
            except Exception as e:  # noqa: BLE001 - DistNetworkError and friends: the store's host is gone
                if self.node != 0:
                    self._alarm(store_gone(st, e), gone=0)
                return

    def _alarm(self, cause: str, gone: int | None = None) -> None:
        if gone is not None:
            self.gone.add(gone)
            self.gone_cause = self.gone_cause or cause
        if self._done.is_set() or self._failed or self.cause is not None:
            return
        self.cause = cause
        self.stop_local()

    def stop(self) -> None:
        """No more alarms (this node is done, or failed and reports)."""
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # ---- the nodes agree on the plan -----------------------------------
    def agree(self) -> None:
        """Before the rendezvous: every node posts its plan's shared fields, node 0 compares them.

        Raises ConfigError (exit 2) on every node, naming each field that differs and its value on each
        node, when the nodes were started with different settings (they would otherwise fail in gloo, hang
        at the rendezvous or train other settings than their plan says). On node 0, a node that never
        posts within ``launch.rdzv_timeout_s`` is named as never having joined (LaunchError).
        """
        self.store.put("plan", self.node, shared_fields(self.plan))
        timeout_s = float(self.plan.launch.rdzv_timeout_s)
        end = time.monotonic() + timeout_s
        if self.node == 0:
            plans: dict[int, dict[str, Any]] = {0: shared_fields(self.plan)}
            while len(plans) < self.nnodes:
                for n in self.others:
                    got = plans.get(n) or self.store.get("plan", n)
                    if got is not None:
                        plans[n] = got
                if len(plans) < self.nnodes and time.monotonic() > end:
                    raise self.error([], f"nodes {sorted(set(self.others) - set(plans))} never joined within "
                                         f"launch.rdzv_timeout_s={timeout_s:g}")
                time.sleep(0.1)
            differ = disagreement(plans)
            self.store.put("verdict", 0, {"differ": differ})
            if differ:
                self._wait_read(time.monotonic() + VERDICT_READ_S)
        else:
            while (verdict := self.store.get("verdict", 0)) is None:
                if time.monotonic() > end:
                    raise LaunchError(f"node 0 did not compare the nodes' plans within launch.rdzv_timeout_s="
                                      f"{timeout_s:g}")
                time.sleep(0.1)
            differ = verdict["differ"]
            self.store.put("verdict_read", self.node, {})
        if differ:
            self.stop()
            raise ConfigError(f"invalid settings across nodes: node {self.node}'s plan differs from another node's "
                              f"(start the same command on every node, only launch.node_rank differing): "
                              + "; ".join(differ))

    def _wait_read(self, end: float) -> None:
        """Node 0: keep the store up until every node read the verdict (or ``end``)."""
        while time.monotonic() < end and any(self.store.get("verdict_read", n) is None for n in self.others):
            time.sleep(0.1)

    # ---- failure reports -----------------------------------------------
    def error(self, failures: list[Failure], fallback: str) -> LaunchError | RefusedInGmi:
        """Post this node's failures; the run's error, naming its root cause (the same on every node)."""
        failures = self.report(failures)
        return run_error(failures, self.nnodes, self.gone_cause or self.cause, node_gone=self.gone_cause is not None,
                         fallback=fallback)

    def report(self, failures: list[Failure], wait: bool = True) -> list[Failure]:
        """Post this node's failures; return every node's once each has reported or is known gone.

        Waits up to REPORT_WAIT_S; longer (until the heartbeat timeout declares the silent ones gone) while no
        root failure is known, so a node killed with its launcher is named rather than its peers' gloo errors.
        """
        self._failed = True  # the watch goes on (it tells silent nodes), but stops no more GMIs
        reports: dict[int, list[Failure]] = {**self._reports, self.node: failures}
        t0 = time.monotonic()
        try:
            self.store.put("report", self.node, {"failures": [f.to_dict() for f in failures], "cause": self.cause})
            while wait and set(reports) | self.gone < set(range(self.nnodes)):
                for n in self.others:
                    if n not in reports and n not in self.gone and self.store.beats(n) == 0:
                        self._never_started(n)  # no launcher of node n beat: nobody will report for it
                    rep = None if n in reports or n in self.gone else self.store.get("report", n)
                    if rep is not None:
                        reports[n] = [Failure(**f) for f in rep["failures"]]
                waited = time.monotonic() - t0
                have_root = any(not f.secondary for fs in reports.values() for f in fs)
                if waited > REPORT_WAIT_S and (have_root or waited > self.timeout_s + REPORT_WAIT_S):
                    break
                time.sleep(0.1)
        except Exception as e:  # noqa: BLE001 - the store's host is gone
            if self.node != 0:
                self.gone.add(0)
                self.gone_cause = self.gone_cause or store_gone(self.store, e)
        self.stop()
        return [f for fs in reports.values() for f in fs]

    def _never_started(self, n: int) -> None:
        """Node ``n``'s launcher never beat (a launcher beats before it meets the rendezvous): it never started."""
        self.gone.add(n)
        self.gone_cause = self.gone_cause or (
            f"node {n} never joined the run: no launcher of node {n} reached the store at launch.rdzv_endpoint="
            f"{self.store.endpoint} (start the same command on every node, each with its launch.node_rank; "
            f"node launchers wait for each other up to launch.rdzv_timeout_s={self.plan.launch.rdzv_timeout_s:g})")

    # ---- summaries -----------------------------------------------------
    def gather(self, summary: dict[str, Any], timeout_s: float) -> dict[int, dict[str, Any]]:
        """Post this node's summary; node 0 returns every node's (waiting for them), the others only their own.

        Raises LaunchError on node 0 when a node reports a failure instead, or stops beating.
        """
        if self.node != 0:
            self.store.put("summary", self.node, summary)
            self.stop()
            return {self.node: summary}
        out = {0: summary}
        end = time.monotonic() + timeout_s
        while len(out) < self.nnodes:
            for n in self.others:
                s = out.get(n) or self.store.get("summary", n)
                if s is not None:
                    out[n] = s
                elif self.cause is not None or self.store.get("report", n) is not None:
                    raise self.error([], f"node {n} failed after node 0's GMIs finished")
            if time.monotonic() > end:
                missing = [n for n in self.others if n not in out]
                raise LaunchError(f"node(s) {missing} sent no summary within {timeout_s:g}s")
            time.sleep(0.2)
        self.stop()
        return out

    def close(self) -> None:
        """Stop watching and drop this node's connection (node 0: the store's server, so it goes last)."""
        self.stop()
        self.store = None  # type: ignore[assignment]
