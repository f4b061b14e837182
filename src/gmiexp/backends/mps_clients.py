"""What backend mps and backend mig (``mps_in_mig``) share: MPS clients and the daemons around a run.

Each GMI's SM share and client environment, the daemons' set-up/tear-down commands as the Plan
shows them, which daemons a GMI quits if its launcher dies, and the session that starts, joins or
checks them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from gmiexp.backends import mps_daemon
from gmiexp.backends.common import require_gpu
from gmiexp.backends.mps_session import running
from gmiexp.errors import ConfigError, invalid
from gmiexp.hardware import Hardware
from gmiexp.plan.model import GMI, ROLES, Plan


def check_host(hw: Hardware, backend: str = "mps") -> None:
    """A real host needs a GPU and the control binary; presets are for planning and pass."""
    require_gpu(hw, backend)
    if not hw.is_preset and shutil.which(mps_daemon.CONTROL) is None:
        raise ConfigError(f"backend={backend} needs {mps_daemon.CONTROL} on PATH (part of the NVIDIA driver "
                          "utilities, e.g. apt install nvidia-utils-<version>); it is missing here; "
                          "valid here: direct")


def role_percent(g: GMI, overrides: dict[str, int]) -> int | None:
    """The largest per-role override among the GMI's roles, None if none applies."""
    hits = [int(overrides[r]) for r in g.roles if r in overrides]
    return max(hits) if hits else None


def shares(gmis: list[GMI], sm_percent: list[int] | None, role_sm: dict[str, int]) -> list[int]:
    """Active thread % per GMI of one GPU: by local index, per role, or an even split."""
    for role in role_sm:
        if role not in ROLES:
            raise invalid("backend.role_sm_percent role", role, ROLES)
    if sm_percent:
        need = max(g.local_index for g in gmis) + 1
        if len(sm_percent) < need:
            raise invalid("backend.sm_percent", list(sm_percent),
                          f"a list of {need} percentages (one per GMI on a GPU, by local index)")
        out = [int(sm_percent[g.local_index]) for g in gmis]
    elif role_sm:
        fixed = [role_percent(g, role_sm) for g in gmis]
        free = [i for i, p in enumerate(fixed) if p is None]
        rest = 100 - sum(p for p in fixed if p is not None)
        even = rest // len(free) if free else 0
        if free and even < 1:
            raise ConfigError(f"backend.role_sm_percent={dict(role_sm)} leaves {rest}% for {len(free)} other "
                              "GMI(s) on a GPU; lower the overrides so each GMI gets >= 1%")
        out = [p if p is not None else even for p in fixed]
    else:
        return [max(1, 100 // len(gmis))] * len(gmis)
    for g, p in zip(gmis, out, strict=True):
        if not 1 <= p <= 100:
            raise invalid(f"SM share of GMI {g.id}", p, "1..100 (percent)")
    if sum(out) > 100:
        detail = ", ".join(f"GMI {g.id}: {p}%" for g, p in zip(gmis, out, strict=True))
        raise ConfigError(f"SM shares on GPU {gmis[0].device} sum to {sum(out)}% > 100% ({detail}); "
                          "lower backend.sm_percent / backend.role_sm_percent so each GPU's sum is <= 100")
    return out


def client_env(g: GMI, visible: str, daemon: mps_daemon.Daemon, percent: int, limit: str | None) -> None:
    """The MPS client environment of one GMI (applied before CUDA initialises)."""
    g.env.update({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": visible, **daemon.client_env(),
                  "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(percent)})
    g.share = f"{percent}%"
    if limit is not None:
        g.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={limit}"  # ordinal 0: the one visible device
        g.memory_limit = limit


def daemon_commands(daemons: list[mps_daemon.Daemon]) -> tuple[list[str], list[str]]:
    """(set-up, tear-down) shell commands of the daemons, as the plan shows them."""
    up: list[str] = []
    down: list[str] = []
    for d in daemons:
        if d.mode == "private":
            up.append(d.start_command())
            down.append(d.quit_command())
        elif d.mode == "shared":
            up.append(f"{d.start_command()}  # shared: only the first concurrent gmiexp run starts it")
            down.append(f"{d.quit_command()}  # shared: only the last run holding it quits it")
    return up, down


def planned_daemons(plan: Plan) -> list[mps_daemon.Daemon]:
    return [mps_daemon.Daemon(**d) for d in plan.mps.daemons] if plan.mps else []


def kept_by(plan: Plan, gmi_id: int) -> list[mps_daemon.Daemon]:
    """The private daemons GMI ``gmi_id`` quits if its launcher dies: those whose lowest-id client it is.

    Exactly one GMI per daemon (each MIG instance of MPS inside MIG has its own); shared and
    existing daemons are never among them.
    """
    kept = []
    for d in planned_daemons(plan):
        if d.mode != "private":
            continue
        local = plan.local_gmis  # another node's GMIs with the same pipe directory use that node's daemon
        clients = [g.id for g in local if g.env.get("CUDA_MPS_PIPE_DIRECTORY") == d.pipe_dir]
        if min(clients or [g.id for g in local]) == gmi_id:
            kept.append(d)
    return kept


@contextmanager
def mps_session(plan: Plan, hw: Hardware) -> Iterator[None]:
    """Start, join or check the plan's daemons around the block; refuse on a planning preset."""
    daemons = planned_daemons(plan)
    if daemons and hw.is_preset:
        raise ConfigError(f"hardware={hw.source.removeprefix('preset:')} is a preset for planning only: "
                          "mode=plan prints this plan; run it on the GPU host with hardware=auto")
    if daemons:
        check_host(hw, plan.backend or "mps")
    with running(daemons):
        yield
