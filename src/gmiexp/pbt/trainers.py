"""What the population controller does otherwise for each trainer's members: rl-games' PPO and rsl_rl's.

A member of either trainer is a normal run of it; the controller reads the same history rows, posts the same records
and sends the same verdicts (:mod:`gmiexp.rl.exploit`). What differs is small and sits here: an epoch's frames
(rl-games' ``horizon_length``, rsl_rl's ``num_steps_per_env``, an mjlab recipe's unless ``train.file`` or
``train.rslrl`` says), the values rsl_rl's recipe decides (a mutation needs a number to start from), where a
member's checkpoint of an epoch lies (rl-games' ``nn/last_*_ep_<epoch>_*.pth``, rsl_rl's ``rsl_rl/model_<it>.pt``
with ``it = epoch - 1``) and how a restart's copy keeps the source's learning only (each trainer's
``for_another_run``).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch
from rsl_rl.algorithms import PPO

from gmiexp.config import Config
from gmiexp.launch.requeue import EPOCH_IN_NAME, epoch_of, latest_checkpoint
from gmiexp.plan import Plan
from gmiexp.rl.rlgames.checkpoint import for_another_run as rlgames_for_another_run
from gmiexp.rl.rslrl.config import CHECKPOINT_DIR as RSLRL_DIR
from gmiexp.rl.rslrl.config import ROLE as RSLRL
from gmiexp.rl.rslrl.envs import runner_config_of
from gmiexp.rl.rslrl.exploit import PREFIX as RSLRL_PREFIX
from gmiexp.rl.rslrl.runstate import for_another_run as rslrl_for_another_run


def rslrl_checkpoint(life_dir: Path, epoch: int) -> Path | None:
    """rsl_rl's checkpoint after ``epoch`` (1-based, as the history's ``iteration``): ``model_<epoch - 1>.pt``."""
    path = Path(life_dir) / RSLRL_DIR / f"model_{epoch - 1}.pt"
    return path if path.is_file() else None


def checkpoint_at(life_dir: Path, epoch: int) -> Path | None:
    """The checkpoint a life wrote at ``epoch``: rl-games' ``nn/last_<name>_ep_<epoch>_...``, else rsl_rl's."""
    for p in sorted(life_dir.glob("rl_games/*/nn/last_*.pth")):
        m = EPOCH_IN_NAME.search(p.name)
        if m and int(m.group(1)) == epoch:
            return p
    return rslrl_checkpoint(life_dir, epoch)


def last_checkpoint(life_dir: Path) -> tuple[Path, int] | None:
    """The whole checkpoint of the highest epoch a life wrote (rl-games' ``nn/``, rsl_rl's dir), with its epoch."""
    found = [c for d in [*sorted(life_dir.glob("rl_games/*/nn")), life_dir / RSLRL_DIR]
             if (c := latest_checkpoint(d)) is not None]
    return max(found, key=lambda c: c[1], default=None)


def life_checkpoint(life_dir: Path, source: Path | None, copy: bool) -> tuple[Path, int] | None:
    """A life's last checkpoint: the latest it wrote, else what it started from (a copy's ``start.pth``)."""
    found = last_checkpoint(life_dir)
    if found is not None:
        return found
    if source is None:
        return None
    path = life_dir / "start.pth" if copy else source
    return (path, epoch_of(path)) if path.is_file() else None


def member_training(cfg: Config, plan: Plan, values: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
    """An epoch's frames of member 0's plan, and each member's values with what rsl_rl's config decides filled in.

    rsl_rl's runner config is the one its GMIs build (:func:`gmiexp.rl.rslrl.envs.runner_config_of`); an mjlab
    recipe is read only when ``train.file`` and ``train.rslrl`` leave a needed key to it (mjlab's import: seconds);
    a key no config gives is rsl_rl's PPO's default.
    """
    envs = sum(g.num_envs for g in plan.gmis)
    if plan.role != RSLRL:
        return envs * int(plan.train.horizon_length), values
    keys = {k for v in values for k, x in v.items() if x is None and k.startswith(RSLRL_PREFIX)}
    needs = ["num_steps_per_env", *(f"algorithm.{k.removeprefix(RSLRL_PREFIX)}" for k in sorted(keys))]
    rc = runner_config_of(plan.task, plan.train.file, plan.train.rslrl, needs)
    defaults = inspect.signature(PPO.__init__).parameters  # what rsl_rl's PPO takes when the config is silent
    filled = [{k: (rc["algorithm"].get(k.removeprefix(RSLRL_PREFIX), defaults[k.removeprefix(RSLRL_PREFIX)].default)
                   if x is None and k in keys else x) for k, x in v.items()} for v in values]
    return envs * int(rc["num_steps_per_env"]), filled


def copy_for_another_run(source: Path, start: Path, values: dict[str, Any], source_values: dict[str, Any]) -> None:
    """Write ``source``'s checkpoint to ``start`` as another member starts from it: the learning, not the run.

    ``values``: the member's ``train.*`` values; those that differ from the source's are set by the new run, so a
    saved schedule must not override them (rl-games' ``for_another_run``; rsl_rl's for the learning rate).
    """
    state = torch.load(source, map_location="cpu", weights_only=False)
    changed = {k: v for k, v in values.items() if k.startswith("train.") and source_values.get(k) != v}
    if isinstance(state, dict) and "actor_state_dict" in state:  # rsl_rl's
        out = rslrl_for_another_run(state, {k.removeprefix(RSLRL_PREFIX): v for k, v in changed.items()
                                            if k.startswith(RSLRL_PREFIX)})
    else:
        out = rlgames_for_another_run(state, [k.split(".", 1)[1] for k in changed])
    torch.save(out, start)

