"""The paper's resource and communication cost model of layouts (section 5.1, Tables 3-5, equations 1-3).

Terms (Table 3): ``R_s, R_a, R_t`` dominant-resource sizes of simulator, agent and trainer (in
percent of one GPU's dominant resource); ``T_s, T_a, T_t`` their time per iteration; ``S, A, W``
the bytes of one state, action and reward vector (one step of all of a GMI's environments);
``M_p`` the policy's bytes; ``m`` simulation steps per training; ``n`` GMIs; ``alpha``/``beta``
the size ratio when simulators share agents/trainers; ``BW`` inter-GMI bandwidth (bytes per time
unit of ``T``). Defaults are the paper's empirical ratios (R_s ~ 10 R_a ~ 5 R_t, T_s ~ 6 T_a ~ 3 T_t,
alpha ~ 0.2, beta ~ 0.3). With no measured ``BW`` it is calibrated to the paper's profiled ratios
COM/BW ~ 2 (T_s + T_a) for TDG and ~ 7 (T_s + T_a + T_t) for TDG_EX, which reproduces the paper's
~2.5x (TCG vs TDG) and ~5x (TCG_EX vs TDG_EX) estimates.

Each layout contributes its row (R^I and COM of Tables 4-5) through ``Layout.resource`` and
``Layout.comm``; the model is fed those rows (:class:`Family`), never layout names, so it imports no layout.
A plan's note holds the table(s) of its layout's kind (:func:`gmiexp.layouts.paper_families`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gmiexp.envs import task_spaces

if TYPE_CHECKING:
    from gmiexp.plan import Plan

#: The paper's profiled COM/BW ratios of the dedicated options (Tables 4-5 calibration, see above).
PAPER_SERVING_COM_RATIO = 2.0
PAPER_TRAINING_COM_RATIO = 7.0


@dataclass
class CostTerms:
    """Table 3's terms (see the module docstring for units)."""

    R_s: float = 50.0
    R_a: float = 5.0
    R_t: float = 10.0
    T_s: float = 6.0
    T_a: float = 1.0
    T_t: float = 2.0
    alpha: float = 0.2
    beta: float = 0.3
    # sizes default to a paper-scale task: 4096 envs, 60 observations, 8 actions, 256-128-64 MLP, 8 GMIs
    S: float = 4096 * 60 * 4.0
    A: float = 4096 * 8 * 4.0
    W: float = 4096 * 4.0
    M_p: float = 229_444.0
    m: int = 16
    n: int = 8
    R_all: float = 100.0  # dominant resource of all GPUs in use (100 per GPU)
    BW: float | None = None  # None = calibrated to the paper's profiled COM/BW ratios

    def ring(self) -> float:
        """Bytes one ring all-reduce of the policy moves per GMI: 2 (n - 1) M_p / n."""
        return 2 * (self.n - 1) * self.M_p / self.n


def dominant_resource(r_sm: float, r_sm_per_gpu: float, r_mem: float, r_mem_per_gpu: float) -> str:
    """Equation 1: SM if the SM share is at least the memory share, else Memory."""
    return "SM" if r_sm / r_sm_per_gpu >= r_mem / r_mem_per_gpu else "Memory"


class TemplateRow(Protocol):
    """A layout's row of Tables 4-5 (a :class:`gmiexp.layouts.Layout` is one): R^I and COM, or None."""

    def resource(self, t: CostTerms) -> float | None: ...

    def comm(self, t: CostTerms) -> float | None: ...


@dataclass(frozen=True)
class Family:
    """One of the paper's two comparisons: a dedicated and a colocated option, by name, with their rows."""

    title: str  #: the note's key, e.g. ``serving (Table 4, eq. 2)``
    dedicated: str
    colocated: str
    rows: Mapping[str, TemplateRow]
    training: bool  #: Table 5 (equation 3): the trainer's time counts too
    com_ratio: float  #: the paper's profiled COM/BW of the dedicated option

    @property
    def options(self) -> tuple[str, str]:
        return self.dedicated, self.colocated


def resource_size(row: TemplateRow, t: CostTerms) -> float:
    """R^I of Tables 4 and 5 (the layout's own row)."""
    r = row.resource(t)
    if r is None:
        raise ValueError(f"{row!r} has no row in the paper's Tables 4-5")
    return r


def comm_size(row: TemplateRow, t: CostTerms) -> float:
    """COM of Tables 4 and 5 (bytes per iteration; the layout's own row)."""
    c = row.comm(t)
    if c is None:
        raise ValueError(f"{row!r} has no row in the paper's Tables 4-5")
    return c


def bandwidth(family: Family, t: CostTerms) -> float:
    """``t.BW``, or the bandwidth at which the dedicated option meets the paper's COM/BW ratio."""
    if t.BW is not None:
        return t.BW
    busy = t.T_s + t.T_a + (t.T_t if family.training else 0.0)
    return comm_size(family.rows[family.dedicated], t) / (family.com_ratio * busy)


def throughput(row: TemplateRow, t: CostTerms, bw: float, training: bool) -> float:
    """Equation 2 (serving) or 3 (training): (R_all / R^I) / (T + COM / BW), iterations per time unit."""
    busy = t.T_s + t.T_a + (t.T_t if training else 0.0)
    return t.R_all / resource_size(row, t) / (busy + comm_size(row, t) / bw)


def compare(family: Family, t: CostTerms) -> dict[str, Any]:
    """Both options of one family (serving or synchronous training) and the colocated speed-up."""
    bw = bandwidth(family, t)
    rows = {o: {"resource": resource_size(r, t), "comm_bytes": comm_size(r, t),
                "comm_over_bw": comm_size(r, t) / bw, "throughput": throughput(r, t, bw, family.training)}
            for o, r in ((o, family.rows[o]) for o in family.options)}
    dedicated, colocated = family.options
    penalty = rows[colocated]["resource"] / rows[dedicated]["resource"] - 1
    return {
        **rows,
        "bw": bw,
        "bw_source": "given" if t.BW is not None else "calibrated to the paper's COM/BW ratio",
        "speedup_colocated": rows[colocated]["throughput"] / rows[dedicated]["throughput"],
        "resource_penalty_colocated": penalty,
    }


def cost_model(families: Sequence[Family], terms: CostTerms) -> dict[str, Any]:
    """The plan note: the terms, then each family's table (the layout package picks them by the layout's kind)."""
    out: dict[str, Any] = {"terms": asdict(terms)}
    for family in families:
        out[family.title] = compare(family, terms)
    return out


def terms_for(plan: Plan, policy_params: int | None) -> CostTerms:
    """Table 3's terms for this plan: sizes from the task (:func:`gmiexp.envs.task_spaces`), ratios from the paper.

    ``policy_params``: the policy's parameter count (M_p = 4 bytes each); the planner passes the policy rl-games
    builds. None, or a task whose sizes are unknown, keeps the paper-scale defaults.
    """
    envs = max(g.num_envs for g in plan.gmis) or 1
    sizes = {"m": plan.train.horizon_length, "n": len(plan.gmis), "R_all": 100.0 * len(plan.devices)}
    if policy_params is None:
        return CostTerms(**sizes)
    try:
        sp = task_spaces(plan.task)
    except Exception:  # noqa: BLE001 - an unknown task id (checked elsewhere): nominal sizes
        return CostTerms(**sizes)
    return CostTerms(S=float(sp.obs_bytes) * envs, A=4.0 * sp.actions_num * envs, W=4.0 * envs,
                     M_p=4.0 * policy_params, **sizes)
