"""A backend defined outside src/ in one file (tests/test_extension_points.py): ``backend.name=ext_backend:Labelled``.

Direct sharing plus a label per GMI in its environment (``EXT_BACKEND_GMI``: the GMI's id), which the GMI's
process sees before anything initialises; its session leaves a record of set-up and tear-down in the run
directory. Selected by ``module:Class`` over the default backend option (``backend=direct``, whose fields it
keeps), or by a YAML option ``backend/ext_labelled.yaml`` (``defaults: [/backend_direct_schema@_here_, _self_]``,
``name: ext_backend:Labelled``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gmiexp.backends.direct import DirectBackend
from gmiexp.plan import Plan

SPEC = f"{__name__}:Labelled"
ENV = "EXT_BACKEND_GMI"
SESSION_FILE = "ext_backend_session.json"


class Labelled(DirectBackend):
    name = SPEC  # what plan.backend records (DirectBackend.realise writes it)

    def realise(self, plan: Plan, run_dir: Path) -> Plan:
        super().realise(plan, run_dir)
        for g in plan.gmis:
            g.env[ENV] = str(g.id)
            g.share = f"labelled {g.id} ({g.share})"
        plan.backend_reason = "ext_backend: direct sharing, each GMI labelled in its environment"
        return plan

    @contextmanager
    def session(self, plan: Plan, run_dir: Path) -> Iterator[None]:
        record = {"plan_id": plan.plan_id, "set_up": True, "torn_down": False}
        (run_dir / SESSION_FILE).write_text(json.dumps(record))
        try:
            yield
        finally:
            (run_dir / SESSION_FILE).write_text(json.dumps({**record, "torn_down": True}))
