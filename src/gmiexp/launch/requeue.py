"""Requeue-friendly training: a run started again in its own run dir resumes from its latest checkpoint.

A preempted Slurm job comes back in the same directory: hydra-submitit-launcher's ``checkpoint()``
resubmits the same Hydra job (same output dir), and an ``sbatch`` script requeued by Slurm runs its
command again (with ``hydra.run.dir`` fixed by the job id). With ``launch.resume=auto`` (the default)
``build_plan`` looks in the run dir for checkpoints a previous attempt wrote (rl-games' ``nn/`` directory
of GMI 0) and, if that attempt trained the same thing, every GMI starts from the latest one: weights,
normalisers, Adam state, epoch and frame counters (rl-games' ``restore``, gmiexp's experience trainers
likewise), so the epoch numbers and frames continue. The summary names the checkpoint (``resumed``).

"The same thing" is what a checkpoint's numbers depend on: task, train section, layout and role, seed,
the GMIs (node, device, roles, environments), trainer group and channels, and the node count; for a run with
a global batch (``batch.total_envs``, ``plan.global_batch``) that batch instead of the GMIs, so a re-shaped
run (``gmiexp.launch.elastic``) goes on from the checkpoint its previous partition wrote. Where an
attempt runs (hosts, GPUs' UUIDs, the rendezvous endpoint, backend daemons, the reduction strategy
picked for the hardware) and ``max_iterations`` (a longer run extends a shorter one) may differ. A run
dir whose checkpoints were trained otherwise is refused (exit 2) rather than silently mixed; a finished
run with nothing left to train is refused too. ``launch.resume=never`` ignores the run dir's checkpoints.

Every start from a checkpoint (this run dir's, or the user's ``checkpoint=``) is the next **segment** of its run
(:mod:`gmiexp.planner.seeds`): its simulators take that segment's environment seeds, so a simulator that cannot
save its state starts episodes no earlier segment stepped (:func:`start_segment`).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from gmiexp.errors import ConfigError
from gmiexp.plan.model import Plan
from gmiexp.planner.seeds import assign_seeds
from gmiexp.rl.rlgames.checkpoint import run_segment, verify
from gmiexp.rl.rlgames.params import build_params
from gmiexp.rl.rlgames.record import checkpoint_dir as nn_dir
from gmiexp.rl.rslrl import config as rslrl

#: the Plan fields that make two attempts "the same training" (see the module docstring)
SAME_TRAINING = ("task", "train", "layout", "role", "seed", "trainer_group", "channels", "channel", "async_train")
GMI_FIELDS = ("id", "node", "device", "roles", "num_envs")
RSLRL_NAME = re.compile(r"^model_(\d+)\.pt$")  # rsl_rl's model_<iteration>.pt (train=rslrl), 0-based
#: the roles whose checkpoints count the run's segments (gmiexp.rl.rlgames.runstate, gmiexp.rl.rslrl.runstate)
SEGMENTED_ROLES = ("ppo", rslrl.ROLE)
EPOCH_IN_NAME = re.compile(r"_ep_(\d+)_")  # rl-games names periodic and final checkpoints ..._ep_<epoch>_rew_...


def training_key(plan: Plan) -> str:
    """Hash of what a checkpoint's numbers depend on; equal for every attempt of one run on any hosts."""
    d = plan.to_dict()
    doc = {k: d.get(k) for k in SAME_TRAINING}
    batch = plan.global_batch
    if batch is not None:  # the partition is not the learning (planner/partition.py): a re-shaped run resumes
        doc["train"] = {k: v for k, v in doc["train"].items() if k != "minibatch_size"}
        for k in ("trainer_group", "channels"):
            doc.pop(k, None)
        doc["gmis"] = {"total_envs": batch.total_envs, "total_minibatch": batch.total_minibatch}
    else:
        doc["gmis"] = [{k: g[k] for k in GMI_FIELDS} for g in d["gmis"]]
    doc["nnodes"] = plan.nnodes
    return hashlib.sha1(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:12]


def checkpoint_dir(plan: Plan) -> Path:
    """Where GMI 0 writes this run's checkpoints (rl-games' ``nn/``; the experience trainers use it too).

    GMI 0 runs on node 0, so with several nodes that is ``<run_dir>/node0/...``: every node resumes from the
    same file, which needs the run dir on a file system the nodes share (Slurm clusters' home or scratch).
    """
    import dataclasses

    if plan.nnodes > 1 and plan.node_rank != 0:  # plan.run_dir is <run_dir>/node<R>
        plan = dataclasses.replace(plan, run_dir=str(Path(plan.run_dir).parent / "node0"))
    if plan.role == rslrl.ROLE:
        return Path(plan.run_dir) / rslrl.CHECKPOINT_DIR
    return nn_dir(build_params(plan, plan.gmis[0]))


def previous_plan(run_dir: Path) -> Plan | None:
    """The Plan an earlier attempt saved in this node's run dir (``<run_dir>/node<R>`` with several nodes), if any."""
    path = run_dir / "plan.yaml"
    return Plan.load(path) if path.is_file() else None


def epoch_of(path: Path) -> int:
    """A checkpoint's epoch: from rl-games' file name, else (the best-reward file) from inside it.

    rsl_rl's ``model_<it>.pt`` holds iterations 0..it: ``it + 1`` epochs; so does an rsl_rl checkpoint under another
    name (a population member's copy of its leader's, ``start.pth``), by its ``iter``.
    """
    r = RSLRL_NAME.match(path.name)
    if r:
        return int(r.group(1)) + 1
    m = EPOCH_IN_NAME.search(path.name)
    if m:
        return int(m.group(1))
    state = read(path)
    return int(state["iter"]) + 1 if "actor_state_dict" in state and "iter" in state else int(state.get("epoch", 0))


def read(path: Path) -> dict[str, Any]:
    import torch  # rl-games' own loader prints to stdout, which carries only the program's output

    return torch.load(path, map_location="cpu", weights_only=False)


def intact(path: Path) -> bool:
    """False when the checkpoint's checksum (written with it) does not match its bytes; True without one."""
    return verify(path) is not False


def latest_checkpoint(nn_dir: Path) -> tuple[Path, int] | None:
    """The checkpoint of the highest epoch (the newest file among equals) that is whole, with that epoch.

    A job killed while rl-games wrote a checkpoint leaves a truncated file, and a disk or copy can damage one
    without changing its size (it would load, then train on garbage): both are passed over (named on stderr) for
    the one before, or every requeue of the job would fail on them. Damage shows against the checksum written
    beside each checkpoint (:func:`gmiexp.rl.rlgames.checkpoint.checksummed`).
    """
    found = []
    for p in [*nn_dir.glob("*.pth"), *nn_dir.glob("model_*.pt")] if nn_dir.is_dir() else []:
        try:
            found.append((epoch_of(p), p.stat().st_mtime, p))
        except Exception as e:  # noqa: BLE001 - unreadable: torch and pickle raise many kinds
            print(f"gmiexp: passing over checkpoint {p} (unreadable: {e})", file=sys.stderr, flush=True)
    for epoch, _, path in sorted(found, reverse=True):
        if not intact(path):
            print(f"gmiexp: passing over checkpoint {path} (damaged: its bytes do not match "
                  f"{path.name}.sha256)", file=sys.stderr, flush=True)
            continue
        try:
            read(path)
        except Exception as e:  # noqa: BLE001
            print(f"gmiexp: passing over checkpoint {path} (unreadable: {e})", file=sys.stderr, flush=True)
            continue
        return path, epoch
    return None


def resume(plan: Plan, run_dir: Path, mode: str) -> Plan:
    """Point ``plan.checkpoint`` at the run dir's latest checkpoint when an earlier attempt left one (mode auto).

    Raises ConfigError (exit 2, nothing launched) when the run dir's checkpoints were trained by a different
    plan, or when the run there finished with nothing left to train. A start from a checkpoint (this one, or the
    user's ``checkpoint=``) takes its segment's environment seeds (:func:`start_segment`).
    """
    _resume(plan, run_dir, mode)
    start_segment(plan)
    return plan


def start_segment(plan: Plan) -> int:
    """The segment of the run this start is (0: no checkpoint), its environment seeds set in ``plan``'s GMIs.

    rl-games' PPO and rsl_rl in tcg_ex keep a segment in their checkpoints (rsl_rl's under its ``infos``); the
    experience layouts' trainers and the serving layouts (a policy to serve, not a run to go on with) keep their
    seeds.
    """
    if not plan.checkpoint or plan.role not in SEGMENTED_ROLES:
        return 0
    state = read(Path(plan.checkpoint))
    segment = run_segment(state.get("infos") or {} if plan.role == rslrl.ROLE else state)
    assign_seeds(plan, segment)
    return segment


def _resume(plan: Plan, run_dir: Path, mode: str) -> None:
    if mode == "never":
        return
    nn_dir = checkpoint_dir(plan)
    latest = latest_checkpoint(nn_dir)
    if latest is None:
        if plan.node_rank != 0 and not nn_dir.parent.exists() and previous_plan(run_dir) is not None:
            raise ConfigError(f"invalid run dir {run_dir} for launch.resume=auto: node {plan.node_rank} ran here "
                              f"before but cannot see node 0's checkpoints ({nn_dir}); valid: a run "
                              "dir on a file system every node shares, or launch.resume=never to train from scratch")
        return
    path, epoch = latest
    before = previous_plan(run_dir)
    if before is None or training_key(before) != training_key(plan):
        what = "no plan.yaml says what trained them" if before is None else \
            f"they were trained by plan {before.plan_id}, not this one ({plan.plan_id})"
        raise ConfigError(f"invalid run dir {run_dir} for launch.resume=auto: it holds checkpoints ({path.name}) but "
                          f"{what}; valid: a new run dir (hydra.run.dir=...), the same command as the run that "
                          "wrote them, or launch.resume=never to train from scratch beside them")
    if epoch >= plan.max_iterations and finished(run_dir):
        raise ConfigError(f"invalid max_iterations={plan.max_iterations} in run dir {run_dir}: the run there finished "
                          f"(checkpoint {path.name} is epoch {epoch}); valid: max_iterations > {epoch} to train on, "
                          "a new run dir, or launch.resume=never")
    plan.checkpoint = str(path.resolve())
    plan.resumed = {"checkpoint": plan.checkpoint, "epoch": epoch}


def finished(run_dir: Path) -> bool:
    """True when the run dir's ``summary.json`` says its run ended well."""
    try:
        return json.loads((run_dir / "summary.json").read_text()).get("status") == "ok"
    except (OSError, ValueError):
        return False
