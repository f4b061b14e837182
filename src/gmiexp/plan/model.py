"""The Plan: the full, serialisable description of one run.

Layout templates build it, backends realise it on hardware, the launcher
executes it, and every worker reads its own GMI from it by rank. Nothing
downstream of the Plan reads the raw Hydra config: the Plan holds the typed
config sections themselves (``plan.train.gamma``), and what the backend set up
(MPS daemons, MIG instances) as typed state. ``notes`` is for people only.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gmiexp.config.schema import AsyncConfig, ChannelConfig, LaunchConfig, LoggerConfig, TaskConfig, TrainConfig
from gmiexp.errors import ConfigError, invalid

ROLES = ("simulator", "agent", "trainer")
PLAN_VERSION = 1


@dataclass
class GMI:
    """One GPU multiplexing instance: one OS process pinned to a slice of one device."""

    id: int  # global: GMI i of node n is n * (GMIs per node) + i
    device: int  # physical GPU index on its node, or a logical one on a CPU-only host
    roles: list[str]
    num_envs: int = 0  # environments this GMI steps (0 for trainer-only GMIs)
    local_index: int = 0  # position among the GMIs on the same device
    share: str = "shared"  # MPS "50%", MIG profile "3g.40gb", CPU core set "cpus 0-1", or "shared"
    memory_limit: str | None = None  # e.g. "20G" (MPS pinned memory limit); None = unlimited
    torch_threads: int = 1  # intra-op threads; rl-games' Runner applies it
    sim_threads: int = 1  # simulator worker threads (envpool)
    cpus: list[int] | None = None  # core affinity; None = not pinned
    env: dict[str, str] = field(default_factory=dict)  # environment applied before CUDA initialises
    node: int = 0  # the node (launch.node_rank) whose launcher starts it
    seed: int = 0  # torch, numpy and random in its process (gmiexp.planner.seeds)
    env_seed: int = 0  # its simulator's: its environments are seeded env_seed, env_seed + 1, ...

    def has(self, role: str) -> bool:
        return role in self.roles


@dataclass
class MpsState:
    """The MPS control daemons a run uses (backend=mps, or backend=mig with mps_in_mig)."""

    daemon: str  # backend.daemon: private | shared | existing
    daemons: list[dict[str, Any]] = field(default_factory=list)  # mps_daemon.Daemon fields, one per daemon


@dataclass
class MigState:
    """The MIG instances a run uses (backend=mig); ``create`` holds the commands for missing ones."""

    instances: list[dict[str, Any]] = field(default_factory=list)  # gmi, gpu, profile, uuid, mig_index
    create: list[list[str]] = field(default_factory=list)  # nvidia-smi mig commands, run by the session
    create_instances: bool = False  # backend.create_instances: gmiexp may run them
    # instances this run created (gpu, gi, ci, uuid, profile), recorded at creation: the only ones it removes
    created: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class GlobalBatch:
    """The learning a run keeps whatever its partition, and the partitions that can share it (``plan.global_batch``).

    ``gmiexp.planner.partition`` sets it when ``batch.total_envs`` is set or the run may re-shape
    (``launch.reshape``); every partition derives its GMIs' ``num_envs`` and ``minibatch_size`` from the totals.
    """

    total_envs: int  # environments over all simulator GMIs (batch.total_envs)
    total_minibatch: int  # samples of one gradient step over all trainer GMIs (batch.total_minibatch)
    reachable: list[int] = field(default_factory=list)  # the gmis_per_gpu values whose GMIs share the batch evenly
    gmis_per_gpu: int = 0  # this plan's partition as the user sets it (a layout may add trainer GMIs)
    envs_per_gmi: list[int] = field(default_factory=list)  # num_envs per simulator GMI, one per ``reachable`` entry
    trainers_per_gpu: int | None = None  # experience layouts: this plan's agent:trainer split (layout.trainers_per_gpu)
    trainer_splits: list[int] | None = None  # experience layouts: the trainers_per_gpu values that share the batch

    def envs_for(self, gmis_per_gpu: int) -> int | None:
        """Each simulator GMI's ``num_envs`` at ``gmis_per_gpu`` GMIs per GPU (None: not a reachable partition)."""
        return dict(zip(self.reachable, self.envs_per_gmi, strict=False)).get(gmis_per_gpu)

    def to_dict(self) -> dict[str, Any]:
        """plan.yaml's form: the agent:trainer split only for a layout that has one."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass
class Plan:
    """Everything needed to launch one run; saved as ``plan.yaml`` in the run directory."""

    gmis: list[GMI]
    layout: str
    backend: str
    reduction: str
    trainer_group: list[int]
    channels: list[list[int]] = field(default_factory=list)  # [agent_gmi, trainer_gmi] pairs
    task: TaskConfig = field(default_factory=TaskConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    hardware: dict[str, Any] = field(default_factory=dict)  # Hardware.summary(): shown, and read by the cost model
    channel: ChannelConfig | None = None  # experience layouts (tdg_ex, decoupled_async) only
    async_train: AsyncConfig | None = None  # experience layouts only
    mps: MpsState | None = None  # set by the backend when the run uses MPS daemons
    mig: MigState | None = None  # set by backend=mig
    role: str = "ppo"
    seed: int = 42
    max_iterations: int = 100
    checkpoint: str = ""
    resumed: dict[str, Any] = field(default_factory=dict)  # checkpoint, epoch: this run dir's own (launch.resume)
    global_batch: GlobalBatch | None = None  # the batch every partition keeps (planner/partition.py); {} in plan.yaml
    video: dict[str, Any] = field(default_factory=dict)  # capture_video=True: every, steps, width, height
    run_dir: str = ""
    experiment: str = "default"
    backend_reason: str = ""
    reduction_reason: str = ""
    setup_commands: list[str] = field(default_factory=list)
    teardown_commands: list[str] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)  # for people (mode=plan prints it); no code reads it
    version: int = PLAN_VERSION

    # ---- queries -------------------------------------------------------
    @property
    def world_size(self) -> int:
        return len(self.gmis)

    @property
    def devices(self) -> list[int]:
        """Device indices of this node (every node has the same ones: nodes are homogeneous)."""
        return sorted({g.device for g in self.local_gmis})

    @property
    def nnodes(self) -> int:
        return int(self.launch.nnodes)

    @property
    def node_rank(self) -> int:
        """The node this copy of the Plan was built on (each node's launcher builds and saves its own)."""
        return int(self.launch.node_rank or 0)

    def node_gmis(self, node: int) -> list[GMI]:
        return [g for g in self.gmis if g.node == node]

    @property
    def local_gmis(self) -> list[GMI]:
        """The GMIs this node's launcher starts, in local-rank order."""
        return self.node_gmis(self.node_rank)

    def gmi(self, gmi_id: int) -> GMI:
        for g in self.gmis:
            if g.id == gmi_id:
                return g
        raise invalid("GMI id", gmi_id, [g.id for g in self.gmis])

    def gpu_map(self, ids: Iterable[int] | None = None) -> list[list[int]]:
        """GMI-to-GPU mapping list (the MPL input of the paper's Algorithm 1), node-major over every node's GPUs."""
        wanted = set(ids) if ids is not None else {g.id for g in self.gmis}
        by_dev: dict[tuple[int, int], list[int]] = {}
        for g in self.gmis:
            if g.id in wanted:
                by_dev.setdefault((g.node, g.device), []).append(g.id)
        return [sorted(by_dev[d]) for d in sorted(by_dev)]

    def node_map(self, ids: Iterable[int] | None = None) -> list[list[list[int]]]:
        """:meth:`gpu_map` split by node: ``[node][gpu] -> GMI ids`` (nodes without a wanted GMI left out)."""
        wanted = set(ids) if ids is not None else {g.id for g in self.gmis}
        nodes = sorted({g.node for g in self.gmis if g.id in wanted})
        return [self.gpu_map(g.id for g in self.node_gmis(n) if g.id in wanted) for n in nodes]

    def total_envs(self) -> int:
        return sum(g.num_envs for g in self.gmis if g.has("simulator"))

    @property
    def plan_id(self) -> str:
        """Content hash, so runs with the same plan can be grouped."""
        d = self.to_dict()
        for volatile in ("run_dir", "checkpoint", "resumed"):
            d.pop(volatile, None)
        for per_node in ("node_rank", "local_addr", "resume"):  # the same run on every node (and attempt): one id
            d["launch"].pop(per_node, None)
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
            if not 0 <= g.node < self.nnodes:
                raise invalid(f"node of GMI {g.id}", g.node, f"0..{self.nnodes - 1} (launch.nnodes={self.nnodes})")
        for t in self.trainer_group:
            if t not in ids:
                raise invalid("trainer_group member", t, ids)
            if not self.gmi(t).has("trainer"):
                raise ConfigError(f"GMI {t} is in the trainer group but has no trainer role ({self.gmi(t).roles})")
        for pair in self.channels:
            if len(pair) != 2 or any(p not in ids for p in pair):
                raise invalid("channel", pair, f"[agent_id, trainer_id] with ids in {ids}")
            if self.gmi(pair[0]).node != self.gmi(pair[1]).node:
                raise invalid("channel", pair, "an agent and a trainer on the same node (channels are shared memory)")
        return self

    # ---- serialisation -------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data (enums as their strings): what plan.yaml holds (no global batch: ``global_batch: {}``)."""
        d = _plain(dataclasses.asdict(self))
        d["global_batch"] = self.global_batch.to_dict() if self.global_batch is not None else {}
        return d

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=100)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        """The inverse of :meth:`to_dict`; an unknown key raises ConfigError naming it."""
        if d.get("global_batch") == {}:  # plan.yaml's "no global batch"
            d = {**d, "global_batch": None}
        return _build(cls, d, "plan")

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


def _plain(value: Any) -> Any:
    """``dataclasses.asdict`` output with enums replaced by their values (YAML has no enums)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _build(cls: type, d: dict[str, Any], where: str) -> Any:
    """A dataclass from plain data: nested dataclasses (also optional ones and lists of them) and enums."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(d) - known
    if unknown:
        raise invalid(f"{where} field", sorted(unknown)[0], sorted(known))
    return cls(**{k: _typed(hints[k], v, f"{where}.{k}") for k, v in d.items()})


def _typed(hint: Any, value: Any, where: str) -> Any:
    if value is None:
        return None
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin is list and args and dataclasses.is_dataclass(args[0]):
        return [_build(args[0], v, where) for v in value]
    if origin is not None and origin is not list and origin is not dict and len(args) == 1:
        hint = args[0]  # X | None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    return value
