"""The Plan: the full, serialisable description of one run.

Layout templates build it, backends realise it on hardware, the launcher
executes it, and every worker reads its own GMI from it by rank. Nothing
downstream of the Plan reads the raw Hydra config.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gmiexp.errors import ConfigError, invalid

ROLES = ("simulator", "agent", "trainer")
PLAN_VERSION = 1


@dataclass
class GMI:
    """One GPU multiplexing instance: one OS process pinned to a slice of one device."""

    id: int
    device: int  # physical GPU index, or a logical one on a CPU-only host
    roles: list[str]
    num_envs: int = 0  # environments this GMI steps (0 for trainer-only GMIs)
    local_index: int = 0  # position among the GMIs on the same device
    share: str = "shared"  # MPS "50%", MIG profile "3g.40gb", CPU core set "cpus 0-1", or "shared"
    memory_limit: str | None = None  # e.g. "20G" (MPS pinned memory limit); None = unlimited
    torch_threads: int = 1  # intra-op threads; rl-games' Runner applies it
    sim_threads: int = 1  # simulator worker threads (envpool)
    cpus: list[int] | None = None  # core affinity; None = not pinned
    env: dict[str, str] = field(default_factory=dict)  # environment applied before CUDA initialises
    node: int = 0

    def has(self, role: str) -> bool:
        return role in self.roles


@dataclass
class Plan:
    """Everything needed to launch one run; saved as ``plan.yaml`` in the run directory."""

    gmis: list[GMI]
    layout: str
    backend: str
    reduction: str
    trainer_group: list[int]
    channels: list[list[int]] = field(default_factory=list)  # [agent_gmi, trainer_gmi] pairs
    task: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    logger: dict[str, Any] = field(default_factory=dict)
    launch: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    role: str = "ppo"
    seed: int = 42
    max_iterations: int = 100
    checkpoint: str = ""
    run_dir: str = ""
    experiment: str = "default"
    backend_reason: str = ""
    reduction_reason: str = ""
    setup_commands: list[str] = field(default_factory=list)
    teardown_commands: list[str] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)  # cost model, calibration, decisions
    version: int = PLAN_VERSION

    # ---- queries -------------------------------------------------------
    @property
    def world_size(self) -> int:
        return len(self.gmis)

    @property
    def devices(self) -> list[int]:
        return sorted({g.device for g in self.gmis})

    def gmi(self, gmi_id: int) -> GMI:
        for g in self.gmis:
            if g.id == gmi_id:
                return g
        raise invalid("GMI id", gmi_id, [g.id for g in self.gmis])

    def gpu_map(self, ids: Iterable[int] | None = None) -> list[list[int]]:
        """GMI-to-GPU mapping list (the MPL input of the paper's Algorithm 1)."""
        wanted = set(ids) if ids is not None else {g.id for g in self.gmis}
        by_dev: dict[int, list[int]] = {}
        for g in self.gmis:
            if g.id in wanted:
                by_dev.setdefault(g.device, []).append(g.id)
        return [sorted(by_dev[d]) for d in sorted(by_dev)]

    def total_envs(self) -> int:
        return sum(g.num_envs for g in self.gmis if g.has("simulator"))

    @property
    def plan_id(self) -> str:
        """Content hash, so runs with the same plan can be grouped."""
        d = self.to_dict()
        for volatile in ("run_dir", "checkpoint"):
            d.pop(volatile, None)
        for g in d["gmis"]:
            g["env"] = {k: v for k, v in g["env"].items() if not k.startswith("CUDA_MPS_")}
        blob = json.dumps(d, sort_keys=True, default=str).encode()
        return hashlib.sha1(blob).hexdigest()[:12]

    # ---- validation ----------------------------------------------------
    def validate(self) -> Plan:
        """Raise ConfigError naming the bad value; return self when valid."""
        if not self.gmis:
            raise ConfigError("the plan has no GMIs; num_gpus and gmis_per_gpu must be >= 1")
        ids = [g.id for g in self.gmis]
        if ids != list(range(len(ids))):
            raise invalid("GMI ids", ids, f"0..{len(ids) - 1} in order")
        for g in self.gmis:
            if not g.roles:
                raise invalid(f"roles of GMI {g.id}", g.roles, ROLES)
            for r in g.roles:
                if r not in ROLES:
                    raise invalid(f"role of GMI {g.id}", r, ROLES)
            if g.has("simulator") and g.num_envs <= 0:
                raise invalid(f"num_envs of GMI {g.id}", g.num_envs, "a positive integer")
            if g.device < 0:
                raise invalid(f"device of GMI {g.id}", g.device, "a GPU index >= 0")
            if g.torch_threads < 1:
                raise invalid(f"torch_threads of GMI {g.id}", g.torch_threads, "an integer >= 1")
        for t in self.trainer_group:
            if t not in ids:
                raise invalid("trainer_group member", t, ids)
            if not self.gmi(t).has("trainer"):
                raise ConfigError(f"GMI {t} is in the trainer group but has no trainer role ({self.gmi(t).roles})")
        for pair in self.channels:
            if len(pair) != 2 or any(p not in ids for p in pair):
                raise invalid("channel", pair, f"[agent_id, trainer_id] with ids in {ids}")
        return self

    # ---- serialisation -------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=100)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        d = dict(d)
        gmis = [GMI(**g) for g in d.pop("gmis")]
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise invalid("plan field", sorted(unknown)[0], sorted(known))
        return cls(gmis=gmis, **d)

    @classmethod
    def from_yaml(cls, text: str) -> Plan:
        return cls.from_dict(yaml.safe_load(text))

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(self.to_yaml())
        tmp.replace(p)
        return p

    @classmethod
    def load(cls, path: str | Path) -> Plan:
        return cls.from_yaml(Path(path).read_text())
