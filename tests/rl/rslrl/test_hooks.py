"""The rsl_rl internals gmiexp builds on (gmiexp.rl.rslrl.hooks) hold in the installed rsl_rl, and a change is named.

Run against every release in ``CHECKED``: the venv's (``make test``) and Isaac Lab 3.0's (``make
test-rslrl-isaaclab``).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import torch
from packaging.requirements import Requirement
from rsl_rl.algorithms import PPO
from rsl_rl.models import MLPModel
from rsl_rl.modules import EmpiricalNormalization
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.storage import RolloutStorage
from rsl_rl.utils.logger import Logger
from torch import nn

from gmiexp.rl.rslrl import hooks
from gmiexp.rl.rslrl.minibatch import GroupRolloutStorage
from gmiexp.rl.rslrl.ppo import GMIPPO, group_kl
from gmiexp.rl.rslrl.runner import GMILogger, gmi_runner
from gmiexp.rl.rslrl.sync import GroupNormalization

ROOT = Path(__file__).resolve().parents[3]


def test_every_hook_holds_in_the_installed_rsl_rl_and_it_is_a_checked_release() -> None:
    assert hooks.problems() == []
    version = hooks.installed_version()
    assert version in hooks.CHECKED, (f"rsl-rl-lib {version} is not one of the releases the hooks were checked "
                                      f"against {hooks.CHECKED}: run the rsl_rl tests with it, then add it")
    hooks.require()  # what every train=rslrl GMI calls first


def test_pyproject_s_range_holds_the_checked_releases_and_mjlab_s_pin() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for rs in project["optional-dependencies"].values() for r in rs]
    (rsl,) = [r for r in reqs if r.name == "rsl-rl-lib"]
    assert all(v in rsl.specifier for v in hooks.CHECKED), (str(rsl.specifier), hooks.CHECKED)
    assert "5.4.2" in rsl.specifier and "5.5.1" in rsl.specifier  # mjlab 1.6.0's pin, Isaac Lab 3.0's
    assert "5.6.0" not in rsl.specifier and "5.4.1" not in rsl.specifier  # bounded: unchecked releases left out


class RenamedNormaliser(nn.Module):
    """rsl_rl's normaliser as a release that renamed its statistics and its update would have it."""

    def __init__(self, shape: int, eps: float = 1e-2, until: int | None = None) -> None:
        super().__init__()
        self.eps = eps
        self.until = until
        self.register_buffer("running_mean", torch.zeros(shape))
        self.register_buffer("_var", torch.ones(shape))
        self.register_buffer("_std", torch.ones(shape))
        self.register_buffer("count", torch.tensor(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.running_mean) / (self._std + self.eps)

    def update_stats(self, x: torch.Tensor) -> None:
        pass


class PPOWithRenamedReduction(PPO):
    reduce_parameters = None  # type: ignore[assignment]  (a release that renamed it: gmiexp's override never runs)


def test_a_renamed_normaliser_field_or_override_is_named() -> None:
    """A rename would leave each GMI's normaliser on its own rows, or its gradients unreduced, silently."""

    def lookup(where: str) -> Any:
        module, _, path = where.partition(":")
        fakes = {"EmpiricalNormalization": RenamedNormaliser, "PPO": PPOWithRenamedReduction}
        head, _, rest = path.partition(".")
        return hooks.resolve(where) if head not in fakes else (getattr(fakes[head], rest) if rest else fakes[head])

    found = hooks.problems(lookup=lookup)
    text = "\n".join(found)
    assert "rsl_rl.modules:EmpiricalNormalization: buffers _mean not found" in text
    assert "rsl_rl.modules:EmpiricalNormalization: method update not found" in text
    assert "rsl_rl.modules:EmpiricalNormalization.forward: calls _mean not found" in text
    assert "rsl_rl.algorithms:PPO: method reduce_parameters not found" in text
    assert len(found) == 4, text


def covered() -> set[tuple[type, str]]:
    """(rsl_rl class, method) pairs a hook names."""
    out = set()
    for h in hooks.HOOKS:
        if h.kind in ("params", "calls"):
            owner, _, name = h.where.rpartition(".")
            out.add((hooks.resolve(owner), name))
        elif h.kind == "method":
            out |= {(hooks.resolve(h.where), n) for n in h.names}
    return out


@pytest.mark.parametrize(("ours", "base"), [
    (GMIPPO, PPO), (GMILogger, Logger), (GroupRolloutStorage, RolloutStorage),
    (GroupNormalization, EmpiricalNormalization), (gmi_runner(OnPolicyRunner), OnPolicyRunner),
    (group_kl(MLPModel, None, False), MLPModel),  # type: ignore[arg-type]
], ids=lambda c: c.__name__)
def test_every_rsl_rl_method_gmiexp_overrides_is_named_in_hooks(ours: type, base: type) -> None:
    """A new override is listed too, so that the check covers it when rsl_rl next renames it."""
    defined = {n for k in ours.__mro__ if not issubclass(base, k) and k is not object for n, v in vars(k).items()
               if inspect.isfunction(v) or isinstance(v, staticmethod)}
    overriding = {n for n in defined if callable(getattr(base, n, None))}
    assert overriding, ours  # the case checks something
    unlisted = {n for n in overriding if (base, n) not in covered()}
    assert not unlisted, f"{ours.__name__} overrides {base.__name__}.{sorted(unlisted)}: name them in hooks.HOOKS"
