"""The paper's resource and communication cost model (section 5.1, Tables 3-5, equations 1-3).

Terms (Table 3): ``R_s, R_a, R_t`` dominant-resource sizes of simulator, agent and trainer (in
percent of one GPU's dominant resource); ``T_s, T_a, T_t`` their time per iteration; ``S, A, W``
the bytes of one state, action and reward vector (one step of all of a GMI's environments);
``M_p`` the policy's bytes; ``m`` simulation steps per training; ``n`` GMIs; ``alpha``/``beta``
the size ratio when simulators share agents/trainers; ``BW`` inter-GMI bandwidth (bytes per time
unit of ``T``). Defaults are the paper's empirical ratios (R_s ~ 10 R_a ~ 5 R_t, T_s ~ 6 T_a ~ 3 T_t,
alpha ~ 0.2, beta ~ 0.3). With no measured ``BW`` it is calibrated to the paper's profiled ratios
COM/BW ~ 2 (T_s + T_a) for TDG and ~ 7 (T_s + T_a + T_t) for TDG_EX, which reproduces the paper's
~2.5x (TCG vs TDG) and ~5x (TCG_EX vs TDG_EX) estimates.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

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


def dominant_resource(r_sm: float, r_sm_per_gpu: float, r_mem: float, r_mem_per_gpu: float) -> str:
    """Equation 1: SM if the SM share is at least the memory share, else Memory."""
    return "SM" if r_sm / r_sm_per_gpu >= r_mem / r_mem_per_gpu else "Memory"


def resource_size(option: str, t: CostTerms) -> float:
    """R^I of Tables 4 and 5."""
    if option == "tdg":
        return (t.T_s * t.R_s + t.T_a * t.alpha * t.R_a) / (t.T_s + t.T_a)
    if option == "tcg":
        return max(t.R_s, t.R_a)
    if option == "tdg_ex":
        total = t.T_s + t.T_a + t.T_t
        return (t.T_s * t.R_s + t.T_a * t.alpha * t.R_a + t.T_t * t.beta * t.R_t) / total
    if option == "tcg_ex":
        return max(t.R_s, t.R_a, t.R_t)
    raise ValueError(option)


def comm_size(option: str, t: CostTerms) -> float:
    """COM of Tables 4 and 5 (bytes per iteration)."""
    ring = 2 * (t.n - 1) * t.M_p / t.n
    return {
        "tdg": 2 * t.S + t.A + t.W,
        "tcg": 0.0,
        "tdg_ex": t.m * (t.S + t.A + t.W) + t.M_p + ring,
        "tcg_ex": ring,
    }[option]


def bandwidth(family: tuple[str, str], t: CostTerms) -> float:
    """``t.BW``, or the bandwidth at which the dedicated option meets the paper's COM/BW ratio."""
    if t.BW is not None:
        return t.BW
    if family == SERVING:
        return comm_size("tdg", t) / (PAPER_SERVING_COM_RATIO * (t.T_s + t.T_a))
    return comm_size("tdg_ex", t) / (PAPER_TRAINING_COM_RATIO * (t.T_s + t.T_a + t.T_t))


def throughput(option: str, t: CostTerms, bw: float) -> float:
    """Equation 2 (serving) or 3 (training): (R_all / R^I) / (T + COM / BW), iterations per time unit."""
    busy = t.T_s + t.T_a + (t.T_t if option in TRAINING else 0.0)
    return t.R_all / resource_size(option, t) / (busy + comm_size(option, t) / bw)


def compare(family: tuple[str, str], t: CostTerms) -> dict[str, Any]:
    """Both options of one family (serving or synchronous training) and the colocated speed-up."""
    bw = bandwidth(family, t)
    rows = {o: {"resource": resource_size(o, t), "comm_bytes": comm_size(o, t),
                "comm_over_bw": comm_size(o, t) / bw, "throughput": throughput(o, t, bw)} for o in family}
    dedicated, colocated = family
    penalty = resource_size(colocated, t) / resource_size(dedicated, t) - 1
    return {
        **rows,
        "bw": bw,
        "bw_source": "given" if t.BW is not None else "calibrated to the paper's COM/BW ratio",
        "speedup_colocated": rows[colocated]["throughput"] / rows[dedicated]["throughput"],
        "resource_penalty_colocated": penalty,
    }


def model_bytes(obs_dim: int, act_dim: int, units: list[int], continuous: bool) -> int:
    """fp32 bytes of rl-games' shared actor-critic MLP (trunk, value head, policy head, log-std)."""
    params, prev = 0, obs_dim
    for u in units:
        params += prev * u + u
        prev = u
    params += prev + 1 + prev * act_dim + act_dim + (act_dim if continuous else 0)
    return 4 * params


def cost_model(layout: str, terms: CostTerms) -> dict[str, Any]:
    """The plan note: the serving table for tcg/tdg, the training table for tcg_ex/tdg_ex, both for async."""
    out: dict[str, Any] = {"terms": asdict(terms)}
    if layout in ("tcg", "tdg", "decoupled_async"):
        out["serving (Table 4, eq. 2)"] = compare(SERVING, terms)
    if layout in ("tcg_ex", "tdg_ex", "decoupled_async"):
        out["training (Table 5, eq. 3)"] = compare(TRAINING, terms)
    return out
