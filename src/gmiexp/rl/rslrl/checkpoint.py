"""rsl_rl checkpoints (``model_<it>.pt``): the record gmiexp writes beside them, the sizes their actor holds, its fit.

rsl_rl's checkpoint holds state dicts (``actor_state_dict``, ``critic_state_dict``, the optimiser's, ``iter``,
``infos``; before 4.0 one ``model_state_dict``; mjlab's adds its environment's step counter under ``infos``), not
the task or the runner config that give them meaning. Group rank 0 of a ``train=rslrl`` run writes the policy
record beside them (``gmiexp_policy.yaml``, the rl-games record's name and format, with ``library: rsl_rl``: the
Plan's task and the runner config the GMIs trained with), so ``mode=eval checkpoint=<run>/rsl_rl/model_<it>.pt``
rebuilds the actor without the config being typed again. mjlab and Isaac Lab keep theirs in ``params/agent.yaml``
beside their checkpoints. Light (torch, YAML): the sizes are read before a simulator is built.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import yaml

from gmiexp.config import TaskConfig
from gmiexp.envs import task_dims
from gmiexp.errors import ConfigError
from gmiexp.rl.rlgames.fit import PolicySizes, differs, recorded_task
from gmiexp.rl.rlgames.record import FORMAT, RECORD

LIBRARY = "rsl_rl"
#: where mjlab's and Isaac Lab's training scripts save the runner config, beside the checkpoints
AGENT_YAML = Path("params") / "agent.yaml"
MLP = re.compile(r"mlp\.(\d+)\.weight$")
STD_KEYS = ("distribution.std_param", "distribution.log_std_param")


def write_record(log_dir: Path, cfg: Mapping[str, Any], task: TaskConfig, plan_id: str = "") -> Path:
    """Record the task and runner config beside the checkpoints ``log_dir`` will hold."""
    log_dir.mkdir(parents=True, exist_ok=True)
    doc = {"format": FORMAT, "library": LIBRARY, "plan_id": plan_id, "task": dataclasses.asdict(task),
           "params": plain(cfg)}
    path = log_dir / RECORD
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def plain(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` as YAML can hold it: tuples as lists, a class or function (a symmetry function) as ``module:name``."""

    def name(obj: Any) -> str:
        qual = getattr(obj, "__qualname__", None)
        return f"{obj.__module__}:{qual}" if qual and hasattr(obj, "__module__") else str(obj)

    return json.loads(json.dumps(dict(cfg), default=name))


def read_state(path: Path) -> dict[str, Any] | None:
    """The checkpoint's dict if it is rsl_rl's (``actor_state_dict``, or pre-4.0 ``model_state_dict``), else None."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception:  # noqa: BLE001 - not a torch file: the rl-games path names the problem
        return None
    if isinstance(state, dict) and ("actor_state_dict" in state or "model_state_dict" in state):
        return state
    return None


def actor_state(state: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The actor's tensors in rsl_rl 5's names (a pre-4.0 or 4.x checkpoint's renamed as mjlab's loader does)."""
    if "actor_state_dict" in state:
        out = dict(state["actor_state_dict"])
    else:
        out = {}
        for k, v in state["model_state_dict"].items():
            if k.startswith("actor."):
                out["mlp." + k.removeprefix("actor.")] = v
            elif k.startswith("actor_obs_normalizer."):
                out["obs_normalizer." + k.removeprefix("actor_obs_normalizer.")] = v
            elif k in ("std", "log_std"):
                out[k] = v
    for old, new in (("std", STD_KEYS[0]), ("log_std", STD_KEYS[1])):
        if old in out:
            out[new] = out.pop(old)
    return {k.removeprefix("_orig_mod."): v for k, v in out.items() if hasattr(v, "shape")}


def sizes(actor: Mapping[str, torch.Tensor]) -> PolicySizes:
    """Observation size, actions and MLP hidden units an actor's tensors hold (None where they do not say).

    The observation normaliser or the first layer (the recurrent one's input for a recurrent actor; not known
    behind a CNN) gives the observation size; a Gaussian's standard deviation the actions.
    """
    shapes = {k: tuple(v.shape) for k, v in actor.items()}
    layers = sorted((int(m.group(1)), shapes[k]) for k in shapes if (m := MLP.match(k)) and len(shapes[k]) == 2)
    rnn = [s for k, s in shapes.items() if k.endswith("weight_ih_l0")]
    cnn = any(k.startswith("cnns.") for k in shapes)
    obs = None
    if "obs_normalizer._mean" in shapes:
        obs = int(torch.Size(shapes["obs_normalizer._mean"]).numel())
    elif rnn:
        obs = rnn[0][1]
    elif layers and not cnn:
        obs = layers[0][1][1]
    std = [shapes[k] for k in STD_KEYS if k in shapes]
    return PolicySizes(obs=obs, actions=int(torch.Size(std[0]).numel()) if std else None,
                       mlp=tuple(s[0] for _, s in layers[:-1]) if layers else None)


def task_sizes(task: TaskConfig) -> PolicySizes | None:
    """The actor's sizes on ``task`` known before anything is built: mjlab's own environments' (the task table).

    None for a ``task.vec_env`` factory: its environment alone says what it observes.
    """
    if task.vec_env or task.simulator != "mjlab":
        return None
    try:
        obs, actions = task_dims(task)
    except (KeyError, ConfigError):  # a task the table does not list: the built actor is checked instead
        return None
    return PolicySizes(obs=obs, actions=actions, mlp=None)


def check_fits(checkpoint: Path, have: PolicySizes, want: PolicySizes, task: str, trained: str | None,
               tensors: str = "") -> None:
    """Exit 2 in one line naming both sides' sizes (and the tensors that differ) when they are not the same policy."""
    if not differs(have, want) and not tensors:
        return
    own = f"task {trained}, " if trained else ""
    hint = f" (task={trained})" if trained and trained != task else ""
    detail = f" ({tensors})" if tensors else ""
    raise ConfigError(
        f"invalid checkpoint={checkpoint}: its policy has {own}{have.describe()}; this run's has task {task}, "
        f"{want.describe()}{detail}; valid: a checkpoint of task {task} with that network, or the checkpoint's own "
        f"task{hint}")


def check_checkpoint_fits(checkpoint: Path, task: TaskConfig) -> None:
    """``train=rslrl checkpoint=``: exit 2 before launch for a file not rsl_rl's or an actor of other sizes.

    The sizes are the task's observations and actions (mjlab's own tasks: the table). A ``task.vec_env``'s are known
    only once it is built; the GMI then compares every tensor (:func:`check_state_fits`).
    """
    state = read_state(checkpoint)
    if state is None:
        raise ConfigError(f"invalid checkpoint={checkpoint}: not an rsl_rl checkpoint (no actor_state_dict, nor a "
                          "pre-4.0 model_state_dict); valid with train=rslrl: a model_<it>.pt of a train=rslrl, mjlab "
                          "or Isaac Lab run")
    want = task_sizes(task)
    if want is not None:
        check_fits(checkpoint, sizes(actor_state(state)), want, str(task.name), recorded_task(checkpoint))


def check_state_fits(checkpoint: Path, actor: torch.nn.Module, task: str) -> None:
    """In a GMI, before rsl_rl loads ``checkpoint``: one line naming both sizes and the tensors that differ.

    Hidden units too; ``load_state_dict`` would print a page of ``size mismatch`` lines instead.
    """
    state = read_state(checkpoint)
    if state is None:
        return  # rsl_rl's own error names it (the launcher refused such a file before any GMI started)
    have, want = actor_state(state), actor.state_dict()
    want = {k.removeprefix("_orig_mod."): v for k, v in want.items()}
    check_fits(checkpoint, sizes(have), sizes(want), task, recorded_task(checkpoint), tensor_diff(have, want))


def tensor_diff(have: Mapping[str, torch.Tensor], want: Mapping[str, torch.Tensor]) -> str:
    """The tensors whose names or shapes differ, the first three named ("" when the state fits the model)."""
    a = {k: tuple(v.shape) for k, v in have.items()}
    b = {k: tuple(v.shape) for k, v in want.items()}
    diffs = [f"{k}: checkpoint {a.get(k, 'absent')}, policy {b.get(k, 'absent')}"
             for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    return "; ".join(diffs[:3]) + (f"; and {len(diffs) - 3} more" if len(diffs) > 3 else "")
