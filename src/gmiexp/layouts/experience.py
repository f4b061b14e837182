"""Layouts whose agents send experience to trainer GMIs over channels: their checks and Plan settings."""

from __future__ import annotations

from typing import Any

from gmiexp.comm.channels import DEFAULT_FIELDS
from gmiexp.comm.store import EVICTIONS, SELECTORS
from gmiexp.errors import ConfigError, invalid
from gmiexp.layouts.layout import Layout, LayoutRequest
from gmiexp.plan import Plan

ALGOS = ("a2c", "ppo")
#: Fields every trainer update reads (PPO and replay also need the behaviour policy's neglogp).
REQUIRED = ("obs", "actions", "rewards", "values", "dones")


class ExperienceLayout(Layout):
    """A layout with channels from agents to trainers; its roles read ``plan.channel`` and ``plan.async_train``."""

    experience = True

    def configure(self, plan: Plan, cfg: Any) -> None:
        check_experience(plan, cfg.channel, cfg.async_train, self.algo(cfg.async_train))
        plan.channel = cfg.channel
        plan.async_train = cfg.async_train

    def algo(self, async_cfg: Any) -> str:
        """The trainers' update (``a2c`` or ``ppo``)."""
        return str(async_cfg.algo)


def check_trainers(req: LayoutRequest, at_most: int | None = None) -> None:
    """``layout.trainers_per_gpu`` >= 1 and, when ``at_most`` is given, at most that many per GPU."""
    t = req.layout.trainers_per_gpu
    if t < 1:
        raise invalid("layout.trainers_per_gpu", t, "an integer >= 1 (trainer GMIs per training GPU)")
    if at_most is not None and t > at_most:
        raise invalid("layout.trainers_per_gpu", t, f"1..{at_most} (at most one trainer per serving GMI on a GPU)")


def check_experience(plan: Plan, channel: Any, async_cfg: Any, algo: str) -> None:
    """ConfigError (exit 2) naming the bad value and the valid range."""
    for f in channel.fields:
        if f not in DEFAULT_FIELDS:
            raise invalid("channel.fields entry", f, DEFAULT_FIELDS)
    if algo not in ALGOS:
        raise invalid("async_train.algo", algo, ALGOS)
    replay = check_replay(async_cfg)
    needed = REQUIRED + (("neglogp",) if algo == "ppo" or replay else ())
    missing = [f for f in needed if f not in channel.fields]
    if missing:
        who = "the a2c trainer with replay (importance weight min(1, pi/mu))" if replay and algo == "a2c" \
            else f"the {algo} trainer"
        raise invalid("channel.fields", list(channel.fields), f"a list including {', '.join(needed)}",
                      f"{who} needs {', '.join(missing)}")
    if channel.slots < 1:
        raise invalid("channel.slots", channel.slots, "an integer >= 1")
    if channel.target_bytes < 64:
        raise invalid("channel.target_bytes", channel.target_bytes, "an integer >= 64 (bytes per transfer)")
    horizon = plan.train.horizon_length
    if horizon < 2:
        raise invalid("train.horizon_length", horizon,
                      f">= 2 for layout={plan.layout} (the last step of a rollout bootstraps the returns)")
    envs = max(g.num_envs for g in plan.gmis)
    batch = horizon * envs
    if batch > channel.store_capacity:
        raise invalid("trainer batch (train.horizon_length x num_envs)", batch,
                      f"1..{channel.store_capacity} (channel.store_capacity rows)",
                      "lower num_envs or train.horizon_length, or raise channel.store_capacity")
    if async_cfg.publish_every < 1:
        raise invalid("async_train.publish_every", async_cfg.publish_every, "an integer >= 1 (updates)")
    if async_cfg.max_policy_lag < 0:
        raise invalid("async_train.max_policy_lag", async_cfg.max_policy_lag, "an integer >= 0 (versions)")
    if async_cfg.drain_timeout_s <= 0:
        raise invalid("async_train.drain_timeout_s", async_cfg.drain_timeout_s, "a positive number of seconds")
    if not plan.trainer_group:
        raise ConfigError(f"layout={plan.layout} produced no trainer GMIs; layout.trainers_per_gpu must be >= 1")


def check_replay(async_cfg: Any) -> bool:
    """Validate the off-policy replay keys; True when replay is on."""
    ratio = async_cfg.replay_ratio
    if isinstance(ratio, bool) or not isinstance(ratio, int) or ratio < 0:
        raise invalid("async_train.replay_ratio", ratio, "an integer >= 0 (replayed batches per fresh batch; 0 = off)")
    if async_cfg.replay_selection not in SELECTORS:
        raise invalid("async_train.replay_selection", async_cfg.replay_selection, SELECTORS)
    if async_cfg.replay_eviction not in EVICTIONS:
        raise invalid("async_train.replay_eviction", async_cfg.replay_eviction, EVICTIONS)
    return ratio > 0
