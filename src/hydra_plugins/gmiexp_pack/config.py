"""Config of the gmiexp_pack launcher (``hydra.launcher.*``), registered in Hydra's ConfigStore.

Hydra imports every module of the ``hydra_plugins`` namespace package when it starts, so this module
stays light: dataclasses and Hydra only. No ``from __future__ import annotations``: Hydra's plugin
scan executes the module outside ``sys.modules``, where dataclasses cannot resolve string annotations.
"""

from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class PackLauncherConf:
    """``hydra/launcher=gmiexp_pack``: members run at once, ``jobs_per_gpu`` per GPU, the rest queue."""

    _target_: str = "hydra_plugins.gmiexp_pack.pack_launcher.PackLauncher"
    # members sharing one GPU at a time: an integer >= 1, or "auto" (chosen by paired profiles of the
    # first member, see auto_*); on a CPU host a logical GPU is a share of the cores
    jobs_per_gpu: Any = 2
    # GPU indices to pack onto (logical GPUs on a CPU host, each an equal share of the launcher's
    # cores); None = every GPU of the host, or one logical GPU (all cores) on a CPU host
    gpus: list[int] | None = None
    # auto: the largest jobs_per_gpu tried (>= 1)
    auto_max_jobs: int = 4
    # auto: one more member per GPU is taken when its paired total env steps/s beats the incumbent's
    # by more than this fraction, in [0, 1)
    auto_min_gain: float = 0.05
    # auto: PPO epochs per profile: warm-up (not measured, >= 0) and measured (>= 1)
    auto_warmup_iterations: int = 2
    auto_profile_iterations: int = 4
    # auto: a profile's measured window covers at least this many env steps (>= 0), as search.min_profile_steps
    auto_min_profile_steps: int = 20000
    # auto: a profile running longer than this (s, > 0) counts as "does not run"
    auto_timeout_s: float = 300.0
    # Ctrl-C: seconds (> 0) the running members get to stop their GMIs and daemons before SIGKILL
    stop_grace_s: float = 20.0
    # seconds (> 0) between checks for finished members (a freed slot starts the next queued one)
    poll_s: float = 0.2
    # when a member ends and none is queued, a running member grows into its idle cores (CPU hosts; the member with
    # the smallest share: more cores, one GMI per core as its batch allows, or a move off a shared core), through
    # gmiexp.tools.reshape's request; members run with launch.reshape=request (their starting batch fixed as the
    # global one). See gmiexp.pack.recycle
    recycle: bool = False
    # recycle: a member grows only when the time saved (its own and its neighbours') exceeds this many times its
    # restart, its start-up's work at the new share (>= 0)
    recycle_payback: float = 2.0


ConfigStore.instance().store(group="hydra/launcher", name="gmiexp_pack", node=PackLauncherConf,
                             provider="gmiexp")
