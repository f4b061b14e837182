"""Gradient reduction strategies (paper section 4.1). ``resolve`` picks one for a plan; ``build`` makes it.

Each strategy module registers its class in :data:`REDUCTIONS` (importing this package imports them):

* ``allreduce``: one flat gloo all-reduce (what rl-games does);
* ``mpr``: multi-process reduction through host shared memory (its members on one node);
* ``mrr``: multi-ring reduction (GMIs per GPU <= GPUs of all nodes, even);
* ``har``: hierarchical reduction (any layout; a third level across nodes);
* ``auto`` (the default): the paper's Algorithm 1 over the plan's GMI-to-GPU map (with Table 2 across
  nodes) where the GMIs run on GPUs; ``allreduce`` where they run on CPU cores (:func:`on_cpu`).
"""

from __future__ import annotations

from gmiexp.comm.manager import GMIManager
from gmiexp.comm.reduction import allreduce, har, mpr, mrr  # noqa: F401 - they register themselves
from gmiexp.comm.reduction.strategy import REDUCTIONS, Reduction
from gmiexp.costmodel.algorithm1 import mrr_limit, select, select_nodes
from gmiexp.costmodel.reductions import estimate_s
from gmiexp.errors import ConfigError, invalid
from gmiexp.plan import Plan

AUTO = "auto"  # not a strategy: Algorithm 1 picks one of REDUCTIONS


def nccl(name: str) -> bool:
    """Strategy ``name`` builds NCCL groups across GPUs (NCCL cannot join MIG instances)."""
    return REDUCTIONS.get(name).nccl


def serving(plan: Plan) -> list[str]:
    """The concrete strategies that can serve the plan's trainer layout on its backend."""
    ok = ["mpr", "har", "allreduce"] if len(plan.node_map(plan.trainer_group)) <= 1 else ["har", "allreduce"]
    if mrr_limit(plan.gpu_map(plan.trainer_group)) is None:
        ok.insert(ok.index("har"), "mrr")
    if plan.backend == "mig":
        ok = [s for s in ok if not nccl(s)]
    return ok


def _mig_refusal(name: str, plan: Plan) -> ConfigError:
    return ConfigError(
        f"invalid reduction: {name!r} with backend=mig: {name.upper()} builds NCCL groups across GPUs, and "
        f"NCCL cannot communicate between MIG instances; valid with backend=mig: "
        f"{', '.join(serving(plan))}, auto; or keep reduction={name} with backend=mps or backend=auto "
        "(on GPUs with MIG disabled)"
    )


def on_cpu(plan: Plan) -> str | None:
    """Why the plan's GMIs run on CPU cores (None when they run on GPUs, or the hardware is not known).

    Algorithm 1 and Table 2 rank strategies by where gradients travel between GPUs (inside one GPU's
    memory, over NVLink/PCIe, across nodes). On CPU cores the "GPUs" are logical shares of one host's
    memory: MPR's and the rings' extra stages buy nothing there, so ``auto`` keeps one host all-reduce.
    """
    if plan.hardware and not plan.hardware.get("gpus"):
        return "this host has no GPU"
    if plan.train.device == "cpu":
        return "train.device=cpu"
    return None


def mpl_text(mpl: list[list[int]], nodes: int = 1) -> str:
    """``MPL=[[...], ...]`` for reasons and errors; a long map is shortened to its ends."""
    where = f" ({len(mpl)} GPUs on {nodes} nodes)" if nodes > 1 else ""
    if len(mpl) <= 8:
        return f"MPL={mpl}{where}"
    return f"MPL=[{', '.join(map(str, mpl[:2]))}, ..., {mpl[-1]}]{where}"


def resolve(name: str, plan: Plan) -> tuple[str, str]:
    """The concrete strategy for ``plan`` and why (``auto`` runs Algorithm 1).

    Raises ConfigError (exit 2) when the requested strategy cannot serve the layout.
    """
    if name != AUTO and not REDUCTIONS.knows(name):  # a registered name, or module:Class
        raise invalid("reduction", name, [*REDUCTIONS, AUTO])
    mpl, nodes = plan.gpu_map(plan.trainer_group), plan.node_map(plan.trainer_group)
    shown = mpl_text(mpl, len(nodes))
    if name == AUTO:
        cpu = on_cpu(plan)
        if cpu is not None:
            return "allreduce", (f"auto: the GMIs run on CPU cores ({cpu}): Algorithm 1 ranks reductions by "
                                 f"links between GPUs, which do not exist here; one host all-reduce (gloo) ({shown})")
        if len(nodes) > 1:
            choice, reason = select_nodes(nodes, estimate_s(plan))
        else:
            choice, reason = select(mpl)
        if plan.backend == "mig" and nccl(choice):
            return "allreduce", (f"{reason}, but NCCL cannot join MIG instances (backend=mig): allreduce "
                                 f"through host memory (gloo) instead ({shown})")
        return choice, f"{reason} ({shown})"
    if plan.backend == "mig" and nccl(name) and len(plan.trainer_group) > 1:
        raise _mig_refusal(name, plan)
    if name == "mrr":
        why = mrr_limit(mpl)
        if why is not None:
            ok = ", ".join(serving(plan))
            raise ConfigError(
                f"invalid reduction: 'mrr' cannot serve this layout: {why} ({shown}); "
                f"valid for this layout: {ok}, auto"
            )
    if name == "mpr" and "mpr" not in serving(plan):
        raise ConfigError(
            f"invalid reduction: 'mpr' with trainer GMIs on {len(nodes)} nodes (launch.nnodes={plan.nnodes}): MPR "
            f"reduces through one host's shared memory and stays inside a node; "
            f"valid for this layout: {', '.join(serving(plan))}, auto"
        )
    return name, f"reduction={name} requested ({shown})"


def build(name: str, mgr: GMIManager, members: list[int]) -> Reduction:
    """Construct strategy ``name`` (collective across all GMIs; ``auto`` is resolved first)."""
    if name == AUTO:
        name, _ = resolve(name, mgr.plan)
    return REDUCTIONS.get(name)(mgr, members)


__all__ = ["AUTO", "REDUCTIONS", "Reduction", "build", "resolve", "select", "serving"]
