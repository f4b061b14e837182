"""A population's members: starting values and nodes (``mode=plan``, the controller), runs' overrides, lives."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gmiexp.config import Config
from gmiexp.config.enums import Mode
from gmiexp.config.schema import PBT_KEYS
from gmiexp.errors import ConfigError, refusal
from gmiexp.pack.runner import Job
from gmiexp.pbt.mutation import initial_values
from gmiexp.rl.rslrl.config import ROLE as RSLRL
from gmiexp.role import PPO_ROLES


def base_values(cfg: Config) -> dict[str, Any]:
    """The run's value of every key ``pbt.mutation`` and ``pbt.init`` name (None: rsl_rl's recipe decides it)."""
    assert cfg.pbt is not None
    out: dict[str, Any] = {}
    for key in (*cfg.pbt.mutation, *cfg.pbt.init):
        node: Any = cfg
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
        out[key] = node
    return out


def starting_values(cfg: Config) -> list[dict[str, Any]]:
    """Each member's starting values: the run's, with ``pbt.init``'s keys drawn log-uniformly (seeded per member)."""
    assert cfg.pbt is not None
    init = {k: (lo, hi) for k, (lo, hi) in cfg.pbt.init.items()}
    return initial_values(base_values(cfg), init, cfg.pbt.population, cfg.seed)


def refuse_unavailable(cfg: Config) -> None:
    """Exit 2 before anything starts: a ``pbt`` group is a population to train (what is built) or to plan."""
    if cfg.pbt is not None and Mode(cfg.mode) not in (Mode.train, Mode.plan, Mode.doctor):
        raise ConfigError(f"invalid mode={Mode(cfg.mode).value} with pbt: a population is trained (mode=train) or "
                          "planned (mode=plan); valid: mode=train, mode=plan, or no pbt group (pbt=null)")
    if cfg.pbt is not None and Mode(cfg.mode) == Mode.train:
        refuse_unbuilt(cfg)


def per_node(population: int, nnodes: int) -> int:
    return math.ceil(population / nnodes)


def place(population: int, nnodes: int) -> list[tuple[int, int]]:
    """Each member's (node, slot index on it): in blocks of :func:`per_node`, so a node's members are neighbours."""
    k = per_node(population, nnodes)
    return [(m // k, m % k) for m in range(population)]


def refuse_nodes(population: int, nnodes: int) -> list[str]:
    """Reasons a population cannot be placed on ``nnodes`` nodes (every node runs at least one member)."""
    used = len({n for n, _ in place(population, nnodes)})
    if used < nnodes:
        return [f"invalid launch.nnodes={nnodes} for pbt.population={population}: {nnodes - used} node(s) would run "
                f"no member ({per_node(population, nnodes)} per node); valid: launch.nnodes <= "
                f"{math.ceil(population / per_node(population, nnodes)) if population else 1}, or a larger "
                "pbt.population"]
    return []


OBJECTIVE = "reward/mean"  # the run-wide return, what the controller ranks members by unless pbt.objective says


def objective_column(objective: str) -> str:
    """The members' history column ``pbt.objective`` is read from: the return, or the info key's.

    A member records ``info/<key>`` with ``train.info_key`` (:func:`objective_overrides`).
    """
    return objective if objective == OBJECTIVE else f"info/{objective}"


def objective_overrides(objective: str) -> list[str]:
    """What a member runs with so that its history records ``pbt.objective``."""
    return [] if objective == OBJECTIVE else [f"train.info_key={objective}"]


#: rsl_rl's ``train.*`` keys (its PPO's fields, :data:`gmiexp.config.schema.RSLRL_LIVE_KEYS`); the others are rl-games'
RSLRL_KEYS = "train.rslrl.algorithm."


def trainer_keys(role: str) -> list[str]:
    """The ``train.*`` keys a member of ``role`` can mutate (rsl_rl's PPO fields, or rl-games' agent's)."""
    return [k for k in PBT_KEYS if k.startswith(RSLRL_KEYS) == (role == RSLRL)]


def key_reasons(role: str, keys: Iterable[str], path: str) -> list[str]:
    """Each key of ``path`` another trainer's: its members would never read it (rl-games' keys for rsl_rl, ...)."""
    valid = trainer_keys(role)
    trainer = "rsl_rl's (train=rslrl)" if role == RSLRL else "rl-games' (role=ppo)"
    return [f"invalid {path} key for {trainer} members: {key!r}; valid: {', '.join(valid)}"
            for key in keys if key not in valid]


def refuse_unbuilt(cfg: Config) -> None:
    """Exit 2 before anything starts for what a population cannot do yet, naming what runs instead."""
    p = cfg.pbt
    assert p is not None
    reasons = []  # both exploits are built: inplace (gmiexp.rl.exploit) and restart
    if cfg.role not in PPO_ROLES:
        reasons.append(f"invalid role={cfg.role} with pbt: other roles' members are not built yet; valid: role=ppo "
                       "(rl-games' PPO), train=rslrl (rsl_rl's)")
    else:
        reasons += key_reasons(cfg.role, p.mutation, "pbt.mutation") + key_reasons(cfg.role, p.init, "pbt.init")
    if cfg.layout.name != "tcg_ex":
        reasons.append(f"invalid layout={cfg.layout.name} with pbt: only tcg_ex members are built; "
                       "valid: layout=tcg_ex")
    reasons += refuse_nodes(p.population, int(cfg.launch.nnodes))
    if cfg.checkpoint:
        reasons.append(f"invalid checkpoint={cfg.checkpoint} with pbt: members start from scratch; valid: ''")
    if reasons:
        raise refusal(reasons, "settings for a pbt run")


# -- each member's runs: the overrides and config of one, a start of it (a life) --

#: what the controller sets on every member itself: the user's overrides of these are dropped
OWNED = ("checkpoint", "launch.resume", "train.save_frequency", "hydra.run.dir", "mode", "seed", "logger.group",
         "logger.tags", "launch.nnodes", "launch.node_rank", "launch.rdzv_endpoint", "launch.rdzv_id",
         "launch.local_addr")
#: a member of a population on several nodes is a run of one node, wherever it runs (gmiexp.pbt.nodes)
ONE_NODE = ["launch.nnodes=1", "launch.node_rank=0"]


def member_overrides(overrides: list[str]) -> list[str]:
    """The user's overrides a member runs with: less ``pbt*`` and what the controller sets itself."""

    def key(o: str) -> str:
        return o.split("=", 1)[0].lstrip("+~")

    return [o for o in overrides if key(o) != "pbt" and not key(o).startswith(("pbt.", "hydra."))
            and key(o) not in OWNED]


def value_overrides(values: dict[str, Any]) -> list[str]:
    """``train.<key>=<value>`` overrides (repr: a float goes through Hydra exactly).

    rsl_rl's keys go into the ``train.rslrl`` dict, where a key the user did not give must be added: ``++``.
    """
    return [f"{'++' if k.startswith('train.rslrl.') else ''}{k}={v!r}" for k, v in values.items() if v is not None]


def with_values(cfg: Config, values: dict[str, Any]) -> Config:
    """A member's Config: the run's, without ``pbt``, with ``values`` set on their dotted keys."""
    out = replace(copy.deepcopy(cfg), pbt=None)
    out.launch.nnodes, out.launch.node_rank, out.launch.rdzv_endpoint = 1, 0, None  # a run of one node
    for dotted, value in values.items():
        if value is None:  # rsl_rl's recipe decides it
            continue
        *parents, leaf = dotted.split(".")
        node: Any = out
        for p in parents:  # rsl_rl's keys go on in the train.rslrl dict (train.rslrl.algorithm.gamma)
            node = node.setdefault(p, {}) if isinstance(node, dict) else getattr(node, p)
        if isinstance(node, dict):
            node[leaf] = value
        else:
            setattr(node, leaf, value)
    return out


@dataclass
class Life:
    """One start of a member: its run dir, its job, its values, where it started (frames, epoch) and from what."""

    member: int
    index: int
    values: dict[str, Any]
    job: Job
    started_frames: int = 0
    seen: int = 0  # history records read
    best: float | None = None  # the best objective within the current interval (DexPBT's)
    source: Path | None = None  # the checkpoint it started from
    cause: str = "new"  # why it started (gmiexp.pbt.state.CAUSES)
    copy: bool = False  # it started from another member's state
