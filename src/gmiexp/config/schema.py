"""Structured config schemas (Hydra ConfigStore). Typos and wrong types fail at compose time.

Each group's YAML files in ``conf/<group>/`` are merged onto the typed node of
:class:`Config`, so an unknown key or a string where an int belongs is
rejected before anything starts.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields
from typing import Any

from omegaconf import MISSING

from gmiexp.config.checks import (
    Anything,
    AtLeast,
    Between,
    Block,
    ExistingFile,
    Initializer,
    Items,
    Kwargs,
    Mapping,
    Maybe,
    OneOf,
    Pair,
    Positive,
    Section,
    Settings,
    Text,
    all_at_once,
    declared,
    ranges,
)
from gmiexp.config.enums import ChannelMode, Mode, OnFull
from gmiexp.config.rslrl_keys import RUNNER_KEYS as RSLRL_RUNNER_KEYS

#: keys ``train.rlgames_config`` may hold (rl-games ``params.config`` keys its agent reads; see rlgames_yaml)
RLGAMES_CONFIG_KEYS = ("bptt_length", "epochs_between_resets", "games_to_track", "normalize_rms_advantage",
                       "save_best_after", "schedule_entropy", "schedule_type", "use_diagnostics", "weight_decay",
                       "zero_rnn_on_done")

#: rl-games' activations (``network_builder.NetworkBuilder.BaseNetwork``)
ACTIVATIONS = ("relu", "tanh", "sigmoid", "elu", "selu", "swish", "gelu", "softplus", "None")


BACKEND_RANGES = dict(name=OneOf(registry="gmiexp.backends:BACKENDS"))
MPS_RANGES = dict(
    daemon=OneOf(registry="gmiexp.backends.mps_daemon:DAEMON_MODES"),
    role_sm_percent=Mapping(OneOf(registry="gmiexp.plan.model:ROLES"), Between(1, 100, unit="percent")),
    memory_limit=Maybe(Text(r"\d+(\.\d+)?\s*([KMGT]i?B?)?", "a size such as 512M, 10G or 10GB")),
)


@ranges(**BACKEND_RANGES)
@dataclass
class BackendConfig:
    """How GMIs are realised on a device: direct | mps | mig | auto. Each option has its own schema below."""

    name: str = "direct"
    pin_cores: bool = False  # pin each GMI to its own cores (os.sched_setaffinity)


@ranges(**BACKEND_RANGES)
@dataclass
class DirectBackendConfig(BackendConfig):
    """backend=direct: GMIs share the device by time-slicing (CPU threads split among them)."""

    name: str = "direct"
    pin_devices: bool = False  # each device's GMIs share that device's cores (logical GPUs on CPU)


@ranges(**BACKEND_RANGES, **MPS_RANGES, sm_percent=Maybe(Items(Between(1, 100, unit="percent"), min_len=1)))
@dataclass
class MpsBackendConfig(BackendConfig):
    """backend=mps: one MPS control daemon; each GMI gets an active-thread share and a memory limit."""

    name: str = "mps"
    # MPS control daemon: private (this run starts and quits its own) | shared (one per host, user and
    # GPU set, started by the first concurrent gmiexp run and quit by the last: packed runs share one
    # MPS server instead of being time-sliced) | existing (join a daemon already serving, e.g. the
    # system's at CUDA_MPS_PIPE_DIRECTORY or /tmp/nvidia-mps; never started nor quit)
    daemon: str = "private"
    sm_percent: list[int] | None = None  # per-GMI active thread % (by local index); None = even split
    role_sm_percent: dict[str, int] = field(default_factory=dict)  # e.g. {trainer: 60}
    memory_limit: str | None = None  # per-GMI pinned device memory, e.g. "10G"


MIG_RANGES = dict(
    profile=Maybe(Text(r"\dg\.\d+gb(\+me)?", "a MIG profile such as 3g.40gb (checked against the GPU's table)")),
)


@ranges(**BACKEND_RANGES, **MPS_RANGES, **MIG_RANGES)
@dataclass
class MigBackendConfig(BackendConfig):
    """backend=mig: one MIG instance per GMI, or GMIs sharing instances through MPS (mps_in_mig)."""

    name: str = "mig"
    profile: str | None = None  # MIG profile per GMI, e.g. "3g.40gb"; None = largest that fits gmis_per_gpu
    create_instances: bool = False  # run the nvidia-smi mig commands (needs admin rights)
    mps_in_mig: bool = False  # GMIs share MIG instances through one MPS daemon per instance (backend.daemon)
    daemon: str = "private"  # mps_in_mig: the daemons' mode (as backend=mps's daemon)
    role_sm_percent: dict[str, int] = field(default_factory=dict)  # mps_in_mig: active thread % by role
    memory_limit: str | None = None  # mps_in_mig: per-GMI pinned device memory, e.g. "10G"


@ranges(**{**declared(DirectBackendConfig), **declared(MpsBackendConfig), **declared(MigBackendConfig)})
@dataclass
class AutoBackendConfig(MigBackendConfig, MpsBackendConfig, DirectBackendConfig):
    """backend=auto: the paper's rule picks direct, mps or mig; the chosen one reads its own fields from here."""

    name: str = "auto"


#: backend name -> its schema (``backends`` builds the chosen backend's config from it)
BACKEND_SCHEMAS: dict[str, type[BackendConfig]] = {
    "direct": DirectBackendConfig, "mps": MpsBackendConfig, "mig": MigBackendConfig, "auto": AutoBackendConfig,
}


@ranges(name=OneOf(registry="gmiexp.layouts:LAYOUTS"), trainers_per_gpu=AtLeast(1),
        serving_gpus=Maybe(AtLeast(1)))
@dataclass
class LayoutConfig:
    """GMI layout template (paper section 5.1)."""

    name: str = "tcg_ex"
    trainers_per_gpu: int = 1  # tdg_ex / decoupled_async: dedicated trainer GMIs per training GPU
    serving_gpus: int | None = None  # decoupled_async: GPUs for serving GMIs (rest train); None = half


@ranges(name=OneOf(registry="gmiexp.comm.reduction:REDUCTIONS", choices=("auto",)))
@dataclass
class ReductionConfig:
    """Gradient reduction among trainer GMIs (paper section 4.1)."""

    name: str = "auto"  # Algorithm 1 where the GMIs run on GPUs; allreduce on CPU cores (comm.reduction.resolve)
    calibrate: bool = False  # measure B1/B2 for the Table 2 cost model in mode=plan


@ranges(
    name=OneOf(tuple(ChannelMode)),
    fields=Items(OneOf(registry="gmiexp.comm.channels.fields:DEFAULT_FIELDS"), min_len=1),
    target_bytes=AtLeast(64, "bytes"), slots=AtLeast(1), store_capacity=AtLeast(1, "rows"),
    on_full=OneOf(tuple(OnFull)),
)
@dataclass
class ChannelConfig:
    """Experience sharing between agent and trainer GMIs (paper section 4.2)."""

    name: ChannelMode = ChannelMode.multi  # multi (one ring per field) | uni (one packed ring)
    fields: list[str] = field(
        default_factory=lambda: ["obs", "actions", "rewards", "values", "dones", "neglogp"]
    )
    target_bytes: int = 1 << 20  # compressor: concatenate pieces up to this size
    slots: int = 64  # slots per channel ring
    store_capacity: int = 65536  # rows in the experience store
    on_full: OnFull = OnFull.block  # block (wait for a free slot) | drop (discard the piece)


@ranges(
    algo=OneOf(registry="gmiexp.layouts.experience:ALGOS"), publish_every=AtLeast(1, "updates"),
    max_policy_lag=AtLeast(0, "weight versions"), drain_timeout_s=Positive("seconds"),
    replay_ratio=AtLeast(0), replay_selection=OneOf(registry="gmiexp.comm.store.selection:SELECTORS"),
    replay_eviction=OneOf(registry="gmiexp.comm.store.index:EVICTIONS"),
)
@dataclass
class AsyncConfig:
    """Experience-sharing training (tdg_ex, decoupled_async) and the A3C-style async trainer."""

    algo: str = "ppo"  # decoupled_async trainer update: ppo (what rl-games trains) | a2c (the paper's A3C study)
    publish_every: int = 1  # trainer updates between weight publications to the agents (k >= 1)
    max_policy_lag: int = 8  # rollouts older than this many weight versions are dropped (>= 0)
    drain_timeout_s: float = 60.0  # trainers give up waiting for experience after this long
    # off-policy replay: every received rollout also goes into the trainer's ExperienceStore
    # (channel.store_capacity records, whole rollouts); after each fresh update the trainers train
    # on replay_ratio more batches drawn from it (PPO: clipped ratio, A2C: truncated IS weight)
    replay_ratio: int = 0  # replayed batches per fresh batch (>= 0; 0 = off, no store is made)
    replay_selection: str = "uniform"  # uniform | prioritized (mean |advantage|) | topk | fifo | lifo
    replay_eviction: str = "fifo"  # fifo | lifo: which stored rollouts make room when the store is full


@ranges(
    name=Text(), simulator=OneOf(registry="gmiexp.envs:SIMULATORS"), env_id=Text(),
    mlp_units=Items(AtLeast(1), min_len=1), reward_scale=Positive(), max_episode_length=AtLeast(1, "steps"),
    mlp_initializer=Initializer(), mu_init=Initializer(), sigma_init=Initializer(),
    mu_activation=OneOf(ACTIVATIONS), sigma_activation=OneOf(ACTIVATIONS),
    cnn=Block(("type", "activation", "initializer", "regularizer", "convs", "permute_input"), "conv stack"),
    rnn=Block(("name", "units", "layers", "before_mlp", "concat_input", "concat_output", "layer_norm"),
              "recurrent layer"),
    env_config=Kwargs(("env_name", "seed", "num_envs", "batch_size", "num_threads", "max_episode_steps"),
                      "the simulator's make"),
    reward_shaper=Block(("shift_value", "min_val", "max_val", "log_val"), "reward shaping beyond the scale"),
    vec_env=Text(r"|[\w.]+:\w+", "empty, or <module>:<function> returning an rsl_rl VecEnv",
                 bad=("no_colon",)),
)
@dataclass
class TaskConfig:
    """Simulator and the task's policy size."""

    name: str = "Ant"
    simulator: str = "envpool"  # envpool | gymnasium | torch | mjlab | isaacgym
    env_id: str = "Ant-v4"  # simulator-specific id
    # extra keyword arguments of the simulator's make (envpool.make: Atari's stack_num, episodic_life, reward_clip,
    # ...; gymnasium.make: the environment's constructor); rl-games' ``env_config`` less env_name and seed.
    # Not here: seed, num_envs, num_threads, max_episode_steps (gmiexp sets them from seed, num_envs, the GMI's
    # threads, max_episode_length)
    env_config: dict[str, Any] = field(default_factory=dict)
    mlp_units: list[int] = field(default_factory=lambda: [256, 128, 64])
    reward_scale: float = 1.0
    # the rest of rl-games' ``reward_shaper`` (shift_value, min_val, max_val, log_val; rl-games' DefaultRewardsShaper
    # shifts, scales, clips to [min_val, max_val], then takes the log); empty = scale only
    reward_shaper: dict[str, Any] = field(default_factory=dict)
    max_episode_length: int = 1000
    continuous: bool = True  # continuous actions (checked against the simulator's action space)
    # the rest of the policy network (rl-games ``params.network``), as rl-games' MuJoCo configs set it
    mlp_initializer: dict[str, Any] = field(default_factory=lambda: {"name": "default"})  # rl-games initializer
    mu_activation: str = "None"  # continuous: activation on the action mean (rl-games name, "None" = identity)
    sigma_activation: str = "None"  # continuous: activation on the log-std
    mu_init: dict[str, Any] = field(default_factory=lambda: {"name": "default"})  # continuous: mean head's init
    sigma_init: dict[str, Any] = field(default_factory=lambda: {"name": "const_initializer", "val": 0})  # log-std
    fixed_sigma: bool = True  # continuous: a state-independent log-std parameter (false: a head predicts it)
    # rl-games' actor_critic network beyond the MLP, as its YAML writes them (empty = none): ``cnn`` (conv stack:
    # type, activation, initializer, regularizer, convs, permute_input) before the MLP, ``rnn`` (name lstm|gru,
    # units, layers, before_mlp, concat_input, layer_norm) around it; ``separate``: the critic has its own towers
    cnn: dict[str, Any] = field(default_factory=dict)
    rnn: dict[str, Any] = field(default_factory=dict)
    separate: bool = False
    # layout=tcg_ex: train rl-games' central value network on the simulator's privileged observations
    # (mjlab's critic group) instead of the policy's value head; other layouts use the value head
    central_value: bool = False
    # train=rslrl: <module>:<function> returning an rsl_rl VecEnv (Isaac Lab, your own); empty = mjlab's by env_id
    vec_env: str = ""


@ranges(
    torch_threads=Maybe(AtLeast(1, "threads")), rlgames_config=Settings(
        RLGAMES_CONFIG_KEYS, "further rl-games setting",
        fixed=(("normalize_rms_advantage", False, "rl-games 1.6.5 cannot build it: its GeneralizedMovingStats "
                "takes no momentum argument, a TypeError in every GMI"),)),
    algo=OneOf(("ppo",)), horizon_length=AtLeast(1, "steps"), minibatch_size=AtLeast(1), mini_epochs=AtLeast(1),
    learning_rate=AtLeast(0), lr_schedule=OneOf(("adaptive", "linear", "identity")), kl_threshold=Positive(),
    gamma=Between(0, 1), tau=Between(0, 1), e_clip=Positive(), entropy_coef=AtLeast(0), critic_coef=AtLeast(0),
    bounds_loss_coef=AtLeast(0), grad_norm=Positive(), seq_length=AtLeast(1, "steps"),
    activation=OneOf(ACTIVATIONS), save_frequency=AtLeast(0, "epochs"),
    device=OneOf(registry="gmiexp.device:DEVICES"),
    file=Text(r"|.+\.ya?ml", "empty, or an rl-games params YAML: a path or rl_games:configs/...yaml", bad=("a.txt",)),
    bound_loss_type=OneOf(("bound", "regularisation")), score_to_win=Maybe(Between()),
    rslrl=Block(RSLRL_RUNNER_KEYS, "rsl_rl runner-config override"),
    info_key=Text(r"|[^.\s]+(\.[^.\s]+)*", "empty, or a dotted key of the environment's step infos "
                  "(episode.Curriculum/difficulty_level)", bad=("episode..x", "a b")),
)
@dataclass
class TrainConfig:
    """rl-games PPO hyper-parameters (the ``params.config`` block of an rl-games YAML)."""

    algo: str = "ppo"
    # the torch device of every role (models, rollouts, advantages, updates, normalisers):
    # auto (the GMI's GPU on a GPU host, else cpu) | cpu | cuda | lazy (PyTorch's lazy TorchScript
    # backend: the CPU stand-in accelerator that checks device handling without a GPU; slow)
    device: str = "auto"
    file: str = ""  # train=rlgames: the rl-games params YAML imported (a path, or rl_games:configs/...)
    horizon_length: int = 16
    minibatch_size: int = 1024  # per GMI; clipped to the GMI's batch
    mini_epochs: int = 4
    # recurrent policies (task.rnn): steps per training sequence (rl-games' seq_length); horizon_length x envs
    # per minibatch must be a multiple of it
    seq_length: int = 4
    learning_rate: float = 3e-4  # 0 freezes the policy (a fixed policy: what return does a partition report?)
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
    use_smooth_clamp: bool = False  # rl-games' smooth clamp of the PPO ratio and value clip
    bound_loss_type: str = "bound"  # bound | regularisation: rl-games' penalty on action means (continuous)
    score_to_win: float | None = None  # stop once the best mean reward exceeds this (None: never)
    activation: str = "elu"
    save_frequency: int = 0  # epochs between checkpoints besides best/last; 0 = off
    mixed_precision: bool = False
    torch_compile: bool = False
    print_stats: bool = False  # rl-games' own per-epoch print line (the progress bar replaces it)
    check_sync: bool = False  # after every epoch, compare a digest of weights+normalisers across GMIs
    # a dotted key of the environment's step infos (episode.Curriculum/difficulty_level): each epoch's history
    # records its mean over the epoch's steps, averaged over the GMIs, as info/<key> (pbt.objective sets it on every
    # member)
    info_key: str = ""
    # at most this many torch intra-op threads per GMI (rl-games' params.torch_threads); None = the GMI's core budget
    torch_threads: int | None = None
    # further rl-games params.config keys passed verbatim to rl-games' own agent (layout tcg_ex): save_best_after,
    # schedule_type, weight_decay, games_to_track, ... (train=rlgames fills it from the file)
    rlgames_config: dict[str, Any] = field(default_factory=dict)
    # train=rslrl: rsl_rl runner-config keys over the task's recipe and train.file (train.rslrl.algorithm.gamma=...)
    rslrl: dict[str, Any] = field(default_factory=dict)


@ranges(name=OneOf(registry="gmiexp.hardware:HARDWARE_CHOICES"), cpu_cores=Maybe(AtLeast(1)),
        mig=OneOf((None, True, False)),
        cpus=Maybe(Items(AtLeast(0, "core id"), min_len=1)), gpus=Maybe(Items(AtLeast(0, "GPU index"), min_len=1)),
        mig_instances=Maybe(Items(Text(what="a MIG device UUID"), min_len=1)), network_gbps=Maybe(Positive("Gb/s")))
@dataclass
class HardwareConfig:
    """Where the run executes: auto (NVML, CPU fallback), cpu, or a preset for planning."""

    name: str = "auto"
    cpu_cores: int | None = None  # override the usable core count
    # presets only: MIG mode of every GPU (true | false); null = the preset's own (on for dgx_a100,
    # h100x8, h200x1), and on a real host always the GPUs' own mode as NVML reports it
    mig: bool | None = None
    # which part of the host this run may use (a packed sweep gives each member its own slice):
    cpus: list[int] | None = None  # cores this run and every process it starts may use; None = all
    gpus: list[int] | None = None  # physical GPU indices; GMI device d runs on gpus[d]; None = 0..num_gpus-1
    mig_instances: list[str] | None = None  # MIG device UUIDs the mig backend may use; None = every instance
    network_gbps: float | None = None  # one node's inter-node bandwidth (Gb/s, > 0); None = the preset's, else unknown


@ranges(name=OneOf(("none", "wandb")), project=Text(), entity=Maybe(Text()),
        mode=OneOf(("offline", "online", "disabled")), group=Maybe(Text()), tags=Items(Text()))
@dataclass
class LoggerConfig:
    """Metrics sinks: none | wandb (offline unless mode=online). TensorBoard from rl-games stays."""

    name: str = "none"
    project: str = "gmiexp"
    entity: str | None = None
    mode: str = "offline"  # offline | online | disabled
    group: str | None = None  # None = the experiment name
    tags: list[str] = field(default_factory=list)


@ranges(heartbeat_timeout_s=Positive("seconds"), monitor_interval_s=Positive("seconds"),
        progress_interval_s=Positive("seconds"), master_port=Between(0, 65535),
        collective_timeout_s=Positive("seconds"), nnodes=AtLeast(1, "nodes"), node_rank=Maybe(AtLeast(0)),
        rdzv_endpoint=Maybe(Text(r"\[?[\w.:-]+\]?:\d{1,5}", "host:port of node 0, e.g. node001:29400")),
        rdzv_id=Maybe(Text(r"[\w.-]+", "a job id such as the Slurm job id")),
        local_addr=Maybe(Text(r"\S+", "this node's address as the other nodes reach it")),
        rdzv_timeout_s=Positive("seconds"), resume=OneOf(("auto", "never")),
        reshape=OneOf(("off", "request", "auto")), reshape_budget=Between(0, 1),
        reshape_window=AtLeast(1, "epochs"), reshape_noise=Between(0, 1, open_hi=True),
        reshape_drift=Between(0, 1, open_lo=True), reshape_cost_s=AtLeast(0, "seconds"),
        reshape_max_gmis_per_gpu=AtLeast(1), reshape_prior=ExistingFile("search.json of a mode=search run"))
@dataclass
class LaunchConfig:
    """Process management around torch.distributed.elastic; ``nnodes > 1`` runs one launcher per node.

    Every node runs the same command; ``node_rank`` (else ``SLURM_NODEID``, else torchrun's ``PET_NODE_RANK``)
    says which node's GMIs this launcher starts. Resolved values are in the Plan (gmiexp.planner.nodes).
    """

    heartbeat_timeout_s: float = 120.0  # a GMI silent this long is declared hung
    collective_timeout_s: float = 300.0  # torch.distributed's timeout for one collective among the GMIs
    monitor_interval_s: float = 0.5
    progress: bool = True  # progress on stderr: a bar on a terminal, else a plain line every progress_interval_s
    progress_interval_s: float = 30.0  # seconds between plain progress lines when stderr is not a terminal (> 0)
    inprocess: bool = False  # run a 1-GMI plan in this process (tests, debugging)
    warm_start: bool = True  # GMIs fork from a server that imported torch, rl-games and the simulator once
    #   (gmiexp.launch.warm); false: each GMI starts a fresh interpreter. Isaac Gym always starts fresh
    master_port: int = 0  # 0 = pick a free port (one node); with nnodes > 1 the port is rdzv_endpoint's
    nnodes: int = 1  # nodes of the run (homogeneous: each runs the single-node layout described by hardware)
    node_rank: int | None = None  # this node, 0..nnodes-1; None = SLURM_NODEID, PET_NODE_RANK, or 0
    rdzv_endpoint: str | None = None  # host:port of node 0, where the c10d rendezvous store listens (nnodes > 1)
    rdzv_id: str | None = None  # the same on every node; None = SLURM_JOB_ID, PET_RDZV_ID, or the plan id
    local_addr: str | None = None  # this node's address for the others; None = 127.0.0.1 for a loopback
    #   endpoint, else the host's name (torch elastic's default)
    rdzv_timeout_s: float = 600.0  # how long node launchers wait for each other at the rendezvous
    resume: str = "auto"  # auto: a run dir holding an earlier attempt's checkpoints (a requeued job) resumes from
    #   the latest (gmiexp.launch.requeue); never: train from scratch (or from checkpoint=)
    # Elastic GMIs (gmiexp.launch.elastic): the run may change its partition (GMIs per GPU) at an epoch boundary,
    # keeping the global batch (batch.*) fixed. off: never; request: when python -m gmiexp.tools.reshape asks;
    # auto: also Algorithm 2 online (paired windows of real epochs), and requests.
    reshape: str = "off"
    reshape_budget: float = 0.25  # auto: at most this fraction of the run's epochs on trial partitions
    reshape_window: int = 3  # auto: steady epochs measured per window (the first epoch after a start excluded)
    reshape_noise: float = 0.02  # auto: the smallest relative gain that counts; a trial must also beat the
    #   incumbent by more than the noise measured in its A-B-A windows (2 standard errors, from the epochs' spread),
    #   and is made only when a win this large would pay for it (gmiexp.launch.payback)
    reshape_drift: float = 0.15  # auto: explore again when throughput drifts this much from what was measured
    reshape_cost_s: float = 10.0  # auto: one re-shape's seconds (stop, checkpoint, re-plan, relaunch, warm-up epoch)
    #   until this run measured its own (>= 0); a move is made only when it pays (gmiexp.launch.payback)
    reshape_max_gmis_per_gpu: int = 4  # auto: the largest partition tried
    reshape_prior: str = ""  # auto: a mode=search run's search.json; partitions it profiled at this run's batch
    #   that lost to the starting one are not tried again (a run from the search's preset starts settled)


@ranges(
    max_gmis_per_gpu=AtLeast(1), num_envs=Items(AtLeast(1), min_len=1, increasing=True), alpha=Between(0, 1),
    min_gain=Between(0, 1, open_hi=True), variant=OneOf(registry="gmiexp.search.algorithm:METHODS", exclude=("grid",)),
    warmup_iterations=AtLeast(0), profile_iterations=AtLeast(1), min_profile_steps=AtLeast(0, "env steps"),
    profile_repeats=AtLeast(1), timeout_s=Positive("seconds"), output=Text(),
    budget=Between(0, 1, open_lo=True), launch_steps=AtLeast(0, "env steps"), pair_length=Between(0, 1, open_lo=True),
    pair_z=Positive(), pair_tolerance=Between(0, 1, open_hi=True), pair_max_profiles=AtLeast(2),
    pair_max_profiles_gmis=AtLeast(2), pair_min_profiles=AtLeast(2),
    pair_min_profiles_gmis=AtLeast(2), pair_plateau=Between(0, 1, open_hi=True), pair_noise=Positive(),
)
@dataclass
class SearchConfig:
    """Algorithm 2 (mode=search)."""

    max_gmis_per_gpu: int = 4
    num_envs: list[int] = field(default_factory=lambda: [128, 256, 512, 1024, 2048, 4096, 8192, 16384])
    alpha: float = 0.05  # saturation threshold on Sat = R_top / R_mem
    min_gain: float = 0.0  # a throughput gain per num_envs step below this also stops a row (0 = the paper's rule)
    grid: bool = False  # profile every point instead of Algorithm 2's early stop
    # paired (default: every decision on back-to-back interleaved profiles) | paper (Algorithm 2 as written)
    # | cn (the Chinese summary's Algorithm 2); ignored when grid=true
    variant: str = "paired"
    warmup_iterations: int = 2
    profile_iterations: int = 4
    min_profile_steps: int = 200_000  # measured env steps per profile at least (small points run more iterations)
    profile_repeats: int = 1  # profiles per point, the fastest kept (robust to a host's interference; cost x N)
    timeout_s: float = 300.0
    cache: bool = True  # reuse profiles across runs (paper, cn, grid; a paired decision always measures afresh)
    output: str = "search_result.yaml"
    # The paired variant (search/paired.py):
    budget: float = 0.45  # its cost at most this fraction of the grid's, in profile-steps; (0, 1]
    launch_steps: int = 500_000  # one profile's launch priced in env steps in that cost model; >= 0
    pair_length: float = 0.5  # its profiles' length relative to a standard profile; (0, 1]
    pair_z: float = 2.0  # decided when the paired log ratio is this many standard errors from its threshold; > 0
    pair_tolerance: float = 0.02  # ... or when that many standard errors are below this relative gap; [0, 1)
    pair_max_profiles: int = 4  # profiles one num_envs decision may hold (a row's reused one included); >= 2
    pair_max_profiles_gmis: int = 8  # profiles one decision between GMI counts may hold; >= 2
    pair_min_profiles: int = 3  # profiles (A-B-A) before a num_envs step may end its row's climb; 2..pair_max_profiles
    pair_min_profiles_gmis: int = 4  # profiles (A-B-A-B) before a decision between GMI counts; 2..max_profiles_gmis
    pair_plateau: float = 0.05  # undecided: climb a row unless this much slower, more GMIs if this much faster; [0, 1)
    pair_noise: float = 0.1  # prior sd of log(rate) between two profiles of a point one profile apart; > 0


@ranges(episodes=AtLeast(1), video_steps=AtLeast(1, "steps"), video_width=AtLeast(16, "pixels"),
        video_height=AtLeast(16, "pixels"))
@dataclass
class EvalConfig:
    """mode=eval: run a checkpoint's policy on the task it was trained on."""

    episodes: int = 10  # episodes averaged (>= 1), run side by side (one environment each)
    deterministic: bool = True  # act with the policy's mean (false: sample from it)
    video: bool = False  # also write eval.mp4 of one episode; needs a renderable simulator (MuJoCo tasks)
    video_steps: int = 1000  # at most this many steps filmed (>= 1)
    video_width: int = 320  # frame size in pixels (multiples of 16 keep the encoder from resizing)
    video_height: int = 240


@ranges(total_envs=Maybe(AtLeast(1, "environments in all")), total_minibatch=Maybe(AtLeast(1, "samples in all")))
@dataclass
class BatchConfig:
    """The global batch: what the learning sees whatever the partition (how many GMIs) it runs on.

    ``num_envs`` and ``train.minibatch_size`` are per GMI, as rl-games' ``num_actors`` and ``minibatch_size`` are
    per GPU in its multi-GPU runs: more GMIs, a larger batch. ``total_envs`` fixes the environments of all
    simulator GMIs together (each steps ``total_envs / GMIs``, so ``num_envs`` is then not used) and
    ``total_minibatch`` the samples of one gradient step over all trainer GMIs (default, with total_envs: what
    one GMI holding the whole batch would use, ``train.minibatch_size`` fitted to ``total_envs x horizon_length``,
    so every partition of the same ``total_envs`` learns alike). A re-shaping run (launch.reshape) fixes both when
    it starts (without total_envs: its starting partition's per-GMI ``num_envs`` and minibatch). A partition
    whose GMIs cannot divide them evenly is refused (exit 2, naming those that can).
    """

    total_envs: int | None = None
    total_minibatch: int | None = None


#: rl-games' agent changes these between epochs (``A2CBase.set_param``; the learning rate and KL threshold through its
#: schedule), so a member takes them without a restart (pbt.exploit=inplace)
RLGAMES_LIVE_KEYS = ("learning_rate", "kl_threshold", "gamma", "tau", "e_clip", "entropy_coef", "critic_coef",
                     "bounds_loss_coef", "grad_norm", "mini_epochs")
#: ... and these only through a restart (pbt.exploit=restart: the rollout buffer's shape changes)
RLGAMES_RESTART_KEYS = ("horizon_length", "minibatch_size")
#: rsl_rl's PPO fields it reads at every update (train=rslrl: train.rslrl.algorithm.<key>) -> (integer, lo, hi)
RSLRL_LIVE_KEYS: dict[str, tuple[bool, float | None, float | None]] = {
    "learning_rate": (False, 0, None), "gamma": (False, 0, 1), "lam": (False, 0, 1), "clip_param": (False, 0, None),
    "entropy_coef": (False, 0, None), "value_loss_coef": (False, 0, None), "max_grad_norm": (False, 0, None),
    "desired_kl": (False, 0, None), "num_learning_epochs": (True, 1, None),
}


@dataclass(frozen=True)
class Mutable:
    """A ``train.*`` key population-based training may mutate: its type, declared range, and whether in place."""

    integer: bool
    lo: float | None
    hi: float | None
    live: bool  # set between epochs without a restart


def _mutable_keys() -> dict[str, Mutable]:
    types = {f.name: f.type for f in fields(TrainConfig)}
    out = {}
    for name in (*RLGAMES_LIVE_KEYS, *RLGAMES_RESTART_KEYS):
        check = declared(TrainConfig)[name]
        assert isinstance(check, Between), name
        out[f"train.{name}"] = Mutable(types[name] == "int", check.lo, check.hi, name in RLGAMES_LIVE_KEYS)
    for name, (integer, lo, hi) in RSLRL_LIVE_KEYS.items():
        out[f"train.rslrl.algorithm.{name}"] = Mutable(integer, lo, hi, True)
    return out


#: every key ``pbt.mutation`` and ``pbt.init`` may name
PBT_KEYS: dict[str, Mutable] = _mutable_keys()


def _pbt_reasons(pbt: PbtConfig, prefix: str, bad: set[str]) -> list[str]:
    """What the fields' ranges cannot say: each mutation fits its key, in-place keys, DexPBT's population."""
    out = []
    if "mutation" not in bad:
        if not pbt.mutation:
            out.append(f"invalid {prefix}mutation: {{}}; valid: at least one key to mutate (rl-games refuses an "
                       "empty mutation too), e.g. {train.learning_rate: mutate_float}")
        mutations = _registry("gmiexp.pbt.mutation:MUTATIONS")
        for key, name in pbt.mutation.items():
            out += _mutation_fits(f"{prefix}mutation.{key}", PBT_KEYS[key], mutations.get(name))
    if not {"exploit", "mutation"} & bad and pbt.exploit == "inplace":
        live = [k for k, m in PBT_KEYS.items() if m.live]
        for key in pbt.mutation:
            if not PBT_KEYS[key].live:
                out.append(f"invalid {prefix}mutation key with {prefix}exploit=inplace: {key!r}; valid: "
                           f"{', '.join(live)} (or {prefix}exploit=restart: {key} changes the rollout's shape)")
    if "init" not in bad:
        for key in pbt.init:
            if PBT_KEYS[key].integer:
                out.append(f"invalid {prefix}init key: {key!r}; valid: a float key (members draw it log-uniformly)")
    if not {"replace_rule", "population"} & bad and pbt.population <= 2:
        rule = _registry("gmiexp.pbt.rules:REPLACE_RULES").get(pbt.replace_rule)
        if rule.mixes_values:  # DexPBT waits for more than max(2, N // 2) members' objectives
            out.append(f"invalid {prefix}population with {prefix}replace_rule={pbt.replace_rule}: {pbt.population}; "
                       "valid: >= 3 (the rule waits for more than max(2, population // 2) members' objectives, so "
                       "2 members never exploit)")
    return out


def _mutation_fits(path: str, key: Mutable, mutation: Any) -> list[str]:
    """The mutation suits its key: an integer key takes an integer mutation, a key's range lies in its domain."""
    if not all(hasattr(mutation, a) for a in ("name", "integer", "domain")):
        return [f"invalid {path}: {mutation!r}; valid: a registered mutation or <module>:<attr> of a "
                "gmiexp.pbt.mutation.Mutation (the @mutation decorator registers one)"]
    if mutation.integer != key.integer:
        kind = "integer" if key.integer else "float"
        return [f"invalid {path}: {mutation.name!r}; valid: a mutation of {kind} values ({path} is a {kind} key)"]
    lo, hi = mutation.domain
    if (lo is not None and (key.lo is None or key.lo < lo)) or (hi is not None and (key.hi is None or key.hi > hi)):
        return [f"invalid {path}: {mutation.name!r}; valid: a mutation for values in [{key.lo}, {key.hi}] "
                f"({mutation.name} takes values in [{lo}, {hi}])"]
    return []


def _registry(spec: str) -> Any:
    module, attr = spec.split(":")
    return getattr(importlib.import_module(module), attr)


@all_at_once(_pbt_reasons)
@ranges(
    population=AtLeast(2, "members"), interval_steps=AtLeast(1, "env steps"), threshold_std=AtLeast(0),
    threshold_abs=AtLeast(0), mutation_rate=Between(0, 1), change_range=Pair(AtLeast(1, "factor")),
    mutation=Mapping(OneOf(tuple(PBT_KEYS)), OneOf(registry="gmiexp.pbt.mutation:MUTATIONS")),
    init=Mapping(OneOf(tuple(PBT_KEYS)), Pair(Positive())),
    objective=Text(r"\S+", "reward/mean (the run-wide return) or a dotted key of the environment's infos (rl-games' "
                   "pbt.objective, e.g. episode.Curriculum/difficulty_level; DexPBT's true_objective)"),
    replace_rule=OneOf(registry="gmiexp.pbt.rules:REPLACE_RULES"), replace_fraction_worst=Between(0, 1, open_lo=True),
    replace_fraction_best=Between(0, 1, open_lo=True), replace_threshold_frac_std=AtLeast(0),
    replace_threshold_frac_absolute=AtLeast(0), leader_params_prob=Between(0, 1),
    start_after=AtLeast(0, "env steps"), initial_delay=AtLeast(0, "env steps"), exploit=OneOf(("inplace", "restart")),
    max_failures=AtLeast(0, "failures"),
)
@dataclass
class PbtConfig:
    """Population-based training (pbt=default|dexpbt|rlgames; off by default): Isaac Lab's / rl-games' and DexPBT's."""

    population: int = 8  # members (rl-games' num_policies)
    interval_steps: int = 100_000  # env steps of a member between its comparisons with the population
    threshold_std: float = 0.10  # default rule: leaders above max(mean + threshold_std * std, mean + threshold_abs)
    threshold_abs: float = 0.05  # default rule: underperformers below min(mean - threshold_std * std, mean - ...abs)
    mutation_rate: float = 0.25  # probability that a mutating member changes each key of mutation
    change_range: list[float] = field(default_factory=lambda: [1.1, 2.0])  # mutate_float's factor k ~ U(lo, hi)
    # train.* key -> mutation function (mutate_float | mutate_discount | mutate_eps_clip | mutate_float_min_1 |
    # mutate_mini_epochs | <module>:<attr>); at least one (pbt=default: Isaac Lab's example set, pbt=dexpbt: DexPBT's)
    mutation: dict[str, str] = field(default_factory=dict)
    # train.* key -> [lo, hi]: each member starts with the key drawn log-uniformly over it (e.g. learning rates)
    init: dict[str, list[float]] = field(default_factory=dict)
    objective: str = "reward/mean"  # what ranks members: the run-wide return, or a dotted key of the env's infos
    replace_rule: str = "default"  # default (Isaac Lab / rl-games master) | dexpbt (DexPBT)
    replace_fraction_worst: float = 0.125  # dexpbt: the bottom ceil(fraction * population) may be replaced
    replace_fraction_best: float = 0.3  # dexpbt: ... by one of the top ceil(fraction * population)
    replace_threshold_frac_std: float = 0.5  # dexpbt: only when the lead exceeds this many standard deviations
    replace_threshold_frac_absolute: float = 0.05  # dexpbt: ... and this fraction of the leader's |objective|
    leader_params_prob: float = 0.5  # dexpbt: a replaced member mutates the leader's values with this probability
    start_after: int = 0  # env steps after a member's start or exploit before it may be replaced again (DexPBT)
    initial_delay: int = 0  # env steps after the run's start before any member is replaced (DexPBT)
    exploit: str = "inplace"  # inplace (state copied over shared memory between epochs) | restart (the anchors' way)
    # members' failures (a non-zero exit the controller did not cause) one start of the population survives: each
    # failed member restarts from its last checkpoint or takes a leader's; one more stops it (exit 1, naming them)
    max_failures: int = 3


@ranges(
    mode=OneOf(tuple(Mode)), seed=Between(-1, 2**32 - 1), capture_video_freq=AtLeast(1, "epochs"),
    num_envs=AtLeast(1, "environments per GMI"),
    max_iterations=AtLeast(1), num_gpus=AtLeast(1), gmis_per_gpu=AtLeast(1),
    role=Text(what="ppo or <module>:<Class>"), checkpoint=ExistingFile("rl-games .pth file"),
    experiment=Text(r"[^/\s]+", "a name without spaces or slashes"),
    objective=Text(r"(perf|reward|time|mem|cpu|gpu|async)/[\w/.]+", "a summary.json metric such as "
                   "perf/env_steps_per_s, reward/mean, time/train_s, mem/peak_rss_mb"),
    extra=Anything("free-form: experiments' own knobs"),
    pbt=Maybe(Section("PbtConfig", "pbt=default, pbt=dexpbt, pbt=rlgames (the rl-games file's pbt: section)")),
)
@dataclass
class Config:
    """Top level, IsaacGymEnvs style: a few run-wide knobs plus the config groups."""

    mode: Mode = Mode.train  # train | plan | search | doctor | eval
    seed: int = 42  # -1: a random seed, recorded in the plan (IsaacGymEnvs' habit)
    num_envs: int = 256  # environments per GMI
    max_iterations: int = 100  # PPO epochs
    num_gpus: int = 1  # GPUs used (logical GPUs on a CPU-only host)
    gmis_per_gpu: int = 2
    role: str = "ppo"  # built-in PPO, or <module>:<Class> of a user's gmiexp.role.Role
    checkpoint: str = ""  # rl-games checkpoint to resume from (mode=eval: the policy to evaluate)
    experiment: str = "default"  # groups runs (W&B group, run directory name)
    objective: str = "perf/env_steps_per_s"  # summary metric a multirun job returns to Hydra's sweeper (Optuna)
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
    batch: BatchConfig = field(default_factory=BatchConfig)
    async_train: AsyncConfig = field(default_factory=AsyncConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    pbt: PbtConfig | None = None  # population-based training: null (off) | pbt=default | pbt=dexpbt | pbt=rlgames
    extra: dict[str, Any] = field(default_factory=dict)  # free-form, for experiments' own knobs
    # IsaacGymEnvs' habits (gmiexp.config.igym):
    test: bool = False  # true: mode=eval (play checkpoint= instead of training)
    headless: bool = True  # accepted; gmiexp opens no viewer, so false changes nothing (it says so)
    capture_video: bool = False  # film an evaluation episode every capture_video_freq epochs while training
    capture_video_freq: int = 10  # epochs between videos (>= 1)


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
    "pbt": PbtConfig,
}
