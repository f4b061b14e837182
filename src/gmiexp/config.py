"""Structured config schemas (Hydra ConfigStore). Typos and wrong types fail at compose time.

Each group's YAML files in ``conf/<group>/`` are merged onto the typed node of
:class:`Config`, so an unknown key or a string where an int belongs is
rejected before anything starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

MODES = ("train", "plan", "search", "doctor")


@dataclass
class BackendConfig:
    """How GMIs are realised on a device: direct | mps | mig | auto."""

    name: str = "direct"
    pin_cores: bool = False  # direct/CPU: pin each GMI to its own cores (os.sched_setaffinity)
    pin_devices: bool = False  # direct: each device's GMIs share that device's cores (logical GPUs on CPU)
    # mps
    use_existing: bool = False  # join an already running MPS daemon instead of starting a private one
    sm_percent: list[int] | None = None  # per-GMI active thread % (by local index); None = even split
    role_sm_percent: dict[str, int] = field(default_factory=dict)  # e.g. {trainer: 60}
    memory_limit: str | None = None  # per-GMI pinned device memory, e.g. "10G"
    # mig
    profile: str | None = None  # MIG profile per GMI, e.g. "3g.40gb"; None = largest that fits gmis_per_gpu
    create_instances: bool = False  # run the nvidia-smi mig commands (needs admin rights)
    mps_in_mig: bool = False  # one MPS daemon per MIG device


@dataclass
class LayoutConfig:
    """GMI layout template (paper section 5.1)."""

    name: str = "tcg_ex"
    trainers_per_gpu: int = 1  # tdg_ex / decoupled_async: dedicated trainer GMIs per training GPU
    serving_gpus: int | None = None  # decoupled_async: GPUs for serving GMIs (rest train); None = half


@dataclass
class ReductionConfig:
    """Gradient reduction among trainer GMIs (paper section 4.1)."""

    name: str = "allreduce"
    calibrate: bool = False  # measure B1/B2 for the Table 2 cost model in mode=plan


@dataclass
class ChannelConfig:
    """Experience sharing between agent and trainer GMIs (paper section 4.2)."""

    name: str = "multi"  # multi | uni
    fields: list[str] = field(
        default_factory=lambda: ["obs", "actions", "rewards", "values", "dones", "neglogp"]
    )
    target_bytes: int = 1 << 20  # compressor: concatenate pieces up to this size
    slots: int = 64  # slots per channel ring
    store_capacity: int = 65536  # rows in the experience store
    on_full: str = "block"  # block | drop


@dataclass
class AsyncConfig:
    """Experience-sharing training (tdg_ex, decoupled_async) and the A3C-style async trainer."""

    algo: str = "a2c"  # decoupled_async trainer update: a2c (advantage actor-critic, A3C) | ppo
    publish_every: int = 1  # trainer updates between weight publications to the agents (k >= 1)
    max_policy_lag: int = 8  # rollouts older than this many weight versions are dropped (>= 0)
    drain_timeout_s: float = 60.0  # trainers give up waiting for experience after this long
    # off-policy replay: every received rollout also goes into the trainer's ExperienceStore
    # (channel.store_capacity records, whole rollouts); after each fresh update the trainers train
    # on replay_ratio more batches drawn from it (PPO: clipped ratio, A2C: truncated IS weight)
    replay_ratio: int = 0  # replayed batches per fresh batch (>= 0; 0 = off, no store is made)
    replay_selection: str = "uniform"  # uniform | prioritized (mean |advantage|) | topk | fifo | lifo
    replay_eviction: str = "fifo"  # fifo | lifo: which stored rollouts make room when the store is full


@dataclass
class TaskConfig:
    """Simulator and the task's policy size."""

    name: str = "Ant"
    simulator: str = "envpool"  # envpool | torch | mjlab | isaacgym
    env_id: str = "Ant-v4"  # simulator-specific id
    mlp_units: list[int] = field(default_factory=lambda: [256, 128, 64])
    reward_scale: float = 1.0
    max_episode_length: int = 1000
    continuous: bool = True
    # layout=tcg_ex: train rl-games' central value network on the simulator's privileged observations
    # (mjlab's critic group) instead of the policy's value head; other layouts use the value head
    central_value: bool = False


@dataclass
class TrainConfig:
    """rl-games PPO hyper-parameters (the ``params.config`` block of an rl-games YAML)."""

    algo: str = "ppo"
    # the torch device of every role (models, rollouts, advantages, updates, normalisers):
    # auto (the GMI's GPU on a GPU host, else cpu) | cpu | cuda | lazy (PyTorch's lazy TorchScript
    # backend: the CPU stand-in accelerator that checks device handling without a GPU; slow)
    device: str = "auto"
    horizon_length: int = 16
    minibatch_size: int = 1024  # per GMI; clipped to the GMI's batch
    mini_epochs: int = 4
    learning_rate: float = 3e-4
    lr_schedule: str = "adaptive"  # adaptive | linear | identity
    kl_threshold: float = 0.008
    gamma: float = 0.99
    tau: float = 0.95
    e_clip: float = 0.2
    entropy_coef: float = 0.0
    critic_coef: float = 2.0
    bounds_loss_coef: float = 0.0001
    grad_norm: float = 1.0
    truncate_grads: bool = True
    normalize_input: bool = True
    normalize_value: bool = True
    normalize_advantage: bool = True
    clip_value: bool = True
    value_bootstrap: bool = True
    activation: str = "elu"
    save_frequency: int = 0  # epochs between checkpoints besides best/last; 0 = off
    mixed_precision: bool = False
    torch_compile: bool = False
    print_stats: bool = False  # rl-games' own per-epoch print line (the progress bar replaces it)
    check_sync: bool = False  # after every epoch, compare a digest of weights+normalisers across GMIs


@dataclass
class HardwareConfig:
    """Where the run executes: auto (NVML, CPU fallback), cpu, or a preset for planning."""

    name: str = "auto"
    cpu_cores: int | None = None  # override the usable core count


@dataclass
class LoggerConfig:
    """Metrics sinks: none | wandb (offline unless mode=online). TensorBoard from rl-games stays."""

    name: str = "none"
    project: str = "gmiexp"
    entity: str | None = None
    mode: str = "offline"  # offline | online | disabled
    group: str | None = None  # None = the experiment name
    tags: list[str] = field(default_factory=list)


@dataclass
class LaunchConfig:
    """Process management around torch.distributed.elastic."""

    heartbeat_timeout_s: float = 120.0  # a GMI silent this long is declared hung
    monitor_interval_s: float = 0.5
    progress: bool = True  # progress bar on stderr
    inprocess: bool = False  # run a 1-GMI plan in this process (tests, debugging)
    master_port: int = 0  # 0 = pick a free port


@dataclass
class SearchConfig:
    """Algorithm 2 (mode=search)."""

    max_gmis_per_gpu: int = 4
    num_envs: list[int] = field(default_factory=lambda: [128, 256, 512, 1024, 2048, 4096, 8192, 16384])
    alpha: float = 0.05  # saturation threshold on Sat = R_top / R_mem
    min_gain: float = 0.0  # a throughput gain per num_envs step below this also stops a row (0 = the paper's rule)
    grid: bool = False  # profile every point instead of Algorithm 2's early stop
    variant: str = "paper"  # paper | cn (the Chinese summary's Algorithm 2); ignored when grid=true
    warmup_iterations: int = 2
    profile_iterations: int = 4
    min_profile_steps: int = 200_000  # measured env steps per profile at least (small points run more iterations)
    profile_repeats: int = 1  # profiles per point, the fastest kept (robust to a host's interference; cost x N)
    timeout_s: float = 300.0
    cache: bool = True
    output: str = "search_result.yaml"


@dataclass
class Config:
    """Top level, IsaacGymEnvs style: a few run-wide knobs plus the config groups."""

    mode: str = "train"  # train | plan | search | doctor
    seed: int = 42
    num_envs: int = 64  # environments per GMI
    max_iterations: int = 100  # PPO epochs
    num_gpus: int = 1  # GPUs used (logical GPUs on a CPU-only host)
    gmis_per_gpu: int = 2
    role: str = "ppo"  # built-in PPO, or <module>:<Class> of a user's gmiexp.role.Role
    checkpoint: str = ""  # rl-games checkpoint to resume from
    experiment: str = "default"  # groups runs (W&B group, run directory name)
    backend: BackendConfig = MISSING
    layout: LayoutConfig = MISSING
    reduction: ReductionConfig = MISSING
    channel: ChannelConfig = MISSING
    task: TaskConfig = MISSING
    train: TrainConfig = MISSING
    hardware: HardwareConfig = MISSING
    logger: LoggerConfig = MISSING
    search: SearchConfig = MISSING
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    async_train: AsyncConfig = field(default_factory=AsyncConfig)
    extra: dict[str, Any] = field(default_factory=dict)  # free-form, for experiments' own knobs


GROUP_SCHEMAS: dict[str, type] = {
    "backend": BackendConfig,
    "layout": LayoutConfig,
    "reduction": ReductionConfig,
    "channel": ChannelConfig,
    "task": TaskConfig,
    "train": TrainConfig,
    "hardware": HardwareConfig,
    "logger": LoggerConfig,
    "search": SearchConfig,
}


def register_configs() -> None:
    """Store the schemas so ``conf/config.yaml`` and every group YAML extend them."""
    cs = ConfigStore.instance()
    cs.store(name="gmiexp_schema", node=Config)
    for group, schema in GROUP_SCHEMAS.items():
        cs.store(group=group, name=f"{group}_schema", node=schema)
