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
``Layout.comm``; a plan's note holds the table(s) of its layout's kind.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gmiexp.layouts.base import Layout, LayoutKind
    from gmiexp.plan import Plan

#: The paper's two families: (dedicated, colocated) of serving (Table 4) and synchronous training (Table 5).
SERVING = ("tdg", "tcg")
TRAINING = ("tdg_ex", "tcg_ex")
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


def _row(option: str) -> Layout:
    from gmiexp.layouts import get

    return get(option)


def resource_size(option: str, t: CostTerms) -> float:
    """R^I of Tables 4 and 5 (the layout's own row)."""
    r = _row(option).resource(t)
    if r is None:
        raise ValueError(f"layout {option!r} has no row in the paper's Tables 4-5")
    return r


def comm_size(option: str, t: CostTerms) -> float:
    """COM of Tables 4 and 5 (bytes per iteration; the layout's own row)."""
    c = _row(option).comm(t)
    if c is None:
        raise ValueError(f"layout {option!r} has no row in the paper's Tables 4-5")
    return c


def bandwidth(family: tuple[str, str], t: CostTerms) -> float:
    """``t.BW``, or the bandwidth at which the dedicated option meets the paper's COM/BW ratio."""
    if t.BW is not None:
        return t.BW
    if family == SERVING:
        return comm_size("tdg", t) / (PAPER_SERVING_COM_RATIO * (t.T_s + t.T_a))
    return comm_size("tdg_ex", t) / (PAPER_TRAINING_COM_RATIO * (t.T_s + t.T_a + t.T_t))


def throughput(option: str, t: CostTerms, bw: float, family: tuple[str, str]) -> float:
    """Equation 2 (serving) or 3 (training): (R_all / R^I) / (T + COM / BW), iterations per time unit."""
    busy = t.T_s + t.T_a + (t.T_t if family == TRAINING else 0.0)
    return t.R_all / resource_size(option, t) / (busy + comm_size(option, t) / bw)


def compare(family: tuple[str, str], t: CostTerms) -> dict[str, Any]:
    """Both options of one family (serving or synchronous training) and the colocated speed-up."""
    bw = bandwidth(family, t)
    rows = {o: {"resource": resource_size(o, t), "comm_bytes": comm_size(o, t),
                "comm_over_bw": comm_size(o, t) / bw, "throughput": throughput(o, t, bw, family)} for o in family}
    dedicated, colocated = family
    penalty = resource_size(colocated, t) / resource_size(dedicated, t) - 1
    return {
        **rows,
        "bw": bw,
        "bw_source": "given" if t.BW is not None else "calibrated to the paper's COM/BW ratio",
        "speedup_colocated": rows[colocated]["throughput"] / rows[dedicated]["throughput"],
        "resource_penalty_colocated": penalty,
    }


def cost_model(kind: LayoutKind, terms: CostTerms) -> dict[str, Any]:
    """The plan note: the serving table for serving layouts, the training table for synchronous ones, both for async."""
    from gmiexp.layouts.base import LayoutKind

    out: dict[str, Any] = {"terms": asdict(terms)}
    if kind in (LayoutKind.SERVING, LayoutKind.ASYNC):
        out["serving (Table 4, eq. 2)"] = compare(SERVING, terms)
    if kind in (LayoutKind.SYNC, LayoutKind.ASYNC):
        out["training (Table 5, eq. 3)"] = compare(TRAINING, terms)
    return out


def terms_for(plan: Plan) -> CostTerms:
    """Table 3's terms for this plan: sizes from the task (:func:`gmiexp.envs.task_spaces`), ratios from the paper.

    ``M_p`` is the policy rl-games builds (:func:`gmiexp.rl.rlgames.params.policy_param_count`); a task whose sizes
    are unknown keeps the paper-scale defaults.
    """
    from gmiexp.envs import task_spaces
    from gmiexp.rl.rlgames.params import policy_param_count

    envs = max(g.num_envs for g in plan.gmis) or 1
    sizes = {"m": plan.train.horizon_length, "n": len(plan.gmis), "R_all": 100.0 * len(plan.devices)}
    try:
        sp = task_spaces(plan.task)
        params = policy_param_count(plan)
    except Exception:  # noqa: BLE001 - an unknown task id (checked elsewhere): nominal sizes
        return CostTerms(**sizes)
    return CostTerms(S=float(sp.obs_bytes) * envs, A=4.0 * sp.actions_num * envs, W=4.0 * envs, M_p=4.0 * params,
                     **sizes)
