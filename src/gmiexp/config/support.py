"""Which ``train.*`` settings and policy kinds gmiexp's learner and the serving layouts refuse (exit 2 at plan time).

A fact about the config (which fields only rl-games' own agent applies), so it lives beside the
schema: the planner reads it without importing the learner it refuses for.

The learner applies the PPO/A2C hyper-parameters, the normalisers and ``lr_schedule`` with
``kl_threshold`` (:mod:`gmiexp.rl.learner.schedule`). The settings below belong to rl-games' own
agent and runner (layout tcg_ex); with an experience layout any value but the default is refused
rather than silently ignored. :func:`refused_policy` names the policy kinds (``task.cnn``,
``task.rnn``) a layout cannot run and the layouts that can.
"""

from __future__ import annotations

from gmiexp.config import TaskConfig, TrainConfig

#: Layouts that run each policy kind beyond a feed-forward MLP (``separate`` and discrete heads run everywhere).
RUNS = {"cnn": ("tcg", "tcg_ex", "tdg_ex", "decoupled_async"),
        "rnn": ("tcg", "tdg", "tcg_ex", "tdg_ex", "decoupled_async")}
#: Why a built-in layout does not run a kind.
WHY_NOT = {("tdg", "cnn"): "its state ring carries each environment's observation as one flat float32 row"}

#: Fields only rl-games' own agent applies: its bounds-loss variant, smooth clamp, early stop, mixed
#: precision, torch.compile, periodic checkpoints (the experience trainer saves one at the end), its
#: per-epoch digest check (the experience trainers report their digests in result.json instead) and the
#: further rl-games keys an imported file passes to it verbatim (``rlgames_config``).
RLGAMES_ONLY = ("bound_loss_type", "use_smooth_clamp", "score_to_win", "mixed_precision", "torch_compile",
                "save_frequency", "check_sync", "rlgames_config")


def refused(train: TrainConfig) -> list[str]:
    """The ``train.<field>`` keys set away from their default that the learner would not apply."""
    default = TrainConfig()
    return [f"train.{k}" for k in RLGAMES_ONLY if getattr(train, k) != getattr(default, k)]


def policy_kinds(task: TaskConfig) -> list[str]:
    """The task's policy kinds beyond an MLP: ``cnn`` and ``rnn`` (rl-games' ``network.cnn`` / ``network.rnn``)."""
    return [k for k in ("cnn", "rnn") if getattr(task, k)]


def refused_policy(layout: str, experience: bool, task: TaskConfig, train: TrainConfig,
                   replay_ratio: int) -> str | None:
    """Why ``layout`` cannot run the task's policy (the message of an exit 2), or None when it can."""
    kinds = policy_kinds(task)
    for kind in kinds:
        why = WHY_NOT.get((layout, kind))
        if why:
            return (f"invalid layout={layout} for a {kind} policy (task.{kind}): {why}; "
                    f"layouts that run it: {', '.join(RUNS[kind])}")
    if experience and "rnn" in kinds:
        if replay_ratio > 0:
            return (f"invalid async_train.replay_ratio={replay_ratio} with a recurrent policy (task.rnn) and "
                    f"layout={layout}: replay re-estimates a stored rollout's values without its recurrent states; "
                    "valid: 0 (layouts that run rnn policies, without replay: " + ", ".join(RUNS["rnn"]) + ")")
        h, s = train.horizon_length, train.seq_length
        if (h - 1) % s:
            return (f"invalid train.horizon_length={h} with a recurrent policy (task.rnn) and layout={layout}: "
                    f"the {h - 1} trained steps of a rollout (the last one bootstraps) must be whole sequences of "
                    f"train.seq_length={s}; valid: k x {s} + 1, e.g. {s + 1}, {2 * s + 1}, {4 * s + 1}")
    return None
