"""Which ``train.*`` settings and policy kinds the experience and serving layouts refuse (exit 2 at plan time).

A fact about the config (which fields which trainer applies), so it lives beside the schema: the planner reads
it without importing the trainers it refuses for.

Layout tdg_ex with one trainer GMI and no replay trains with rl-games' own agent
(:mod:`gmiexp.rl.experience.fed_update`), which applies every key rl-games' agent honours. Several tdg_ex
trainers, replay and decoupled async train with gmiexp's learner (:mod:`gmiexp.rl.learner`), which applies every
``train.*`` field rl-games' agent reads; the keys an imported file passes through that it does not apply
(:data:`RLGAMES_CONFIG_WHY`) are refused rather than silently ignored, all in one message, each with its reason.
What rl-games' ``play_steps`` reads (``train.value_bootstrap``, ``zero_rnn_on_done``, ``epochs_between_resets``)
the agent GMIs apply as it does (:class:`gmiexp.rl.experience.agent_loop.Play`), for every trainer.
:func:`refused_policy` names the policy kinds (``task.cnn``, ``task.rnn``) a layout cannot run and the layouts
that can.
"""

from __future__ import annotations

from gmiexp.config import TaskConfig, TrainConfig

#: Layouts that run each policy kind beyond a feed-forward MLP (``separate`` and discrete heads run everywhere).
RUNS = {"cnn": ("tcg", "tcg_ex", "tdg_ex", "decoupled_async"),
        "rnn": ("tcg", "tdg", "tcg_ex", "tdg_ex", "decoupled_async")}
#: Why a built-in layout does not run a kind.
WHY_NOT = {("tdg", "cnn"): "its state ring carries each environment's observation as one flat float32 row"}

_AGENT = "rl-games' agent (tcg_ex, or tdg_ex with one trainer and no replay) applies it"
#: The keys an imported file passes to rl-games' agent (``train.rlgames_config``) that change what the learner
#: would train, with rl-games' default (a file may state it) and why. The others have no effect on training
#: there: ``bptt_length`` (rl-games uses it nowhere), ``schedule_type`` (the learner has both),
#: ``epochs_between_resets`` (the agent GMIs reset their environments as rl-games' agent does), and
#: ``save_best_after``, ``games_to_track``, ``use_diagnostics`` (reporting: the agent GMIs report returns over
#: their last 100 episodes, and the trainers write their periodic and last checkpoints, no best one).
RLGAMES_CONFIG_WHY = {
    "schedule_entropy": (False, f"the learner keeps train.entropy_coef; {_AGENT}"),
    "zero_rnn_on_done": (True, "the learner always restarts a finished episode's recurrent states inside its "
                               f"sequences; {_AGENT}"),
}


def refused(train: TrainConfig, rlgames_agent: bool = False) -> dict[str, str]:
    """``train.<key>`` -> why, for the settings the trainer would not apply (none with rl-games' own agent).

    ``rlgames_agent``: the trainer runs rl-games' own agent (tdg_ex, one trainer, no replay), which applies
    every key; gmiexp's learner applies every ``train.*`` field rl-games' agent reads (``score_to_win``,
    ``save_frequency`` and ``check_sync`` are the layouts' own), but not every key an imported file passes
    through (:data:`RLGAMES_CONFIG_WHY`).
    """
    if rlgames_agent:
        return {}
    return {f"train.rlgames_config.{k}": RLGAMES_CONFIG_WHY[k][1] for k, v in train.rlgames_config.items()
            if k in RLGAMES_CONFIG_WHY and v != RLGAMES_CONFIG_WHY[k][0]}


def refusal_message(layout: str, keys: dict[str, str]) -> str:
    """One exit-2 message naming every refused key and its reason."""
    parts = "; ".join(f"{k} ({why})" for k, why in keys.items())
    return (f"invalid {', '.join(keys)} with layout={layout}: {parts}; drop them "
            f"(for an imported file: <key>=<rl-games default>)")


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
        if h % s:
            return (f"invalid train.horizon_length={h} with a recurrent policy (task.rnn) and layout={layout}: "
                    f"the {h} trained steps of a rollout must be whole sequences of train.seq_length={s} "
                    f"(as rl-games asks); valid: k x {s}, e.g. {s}, {2 * s}, {4 * s}")
    return None
