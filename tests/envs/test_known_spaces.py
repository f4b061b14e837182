"""Planning sizes shipped tasks from gmiexp.envs.known; every entry must be what the simulator itself reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from gmitest import compose_config

from gmiexp.config import TaskConfig
from gmiexp.config.compose import conf_dir
from gmiexp.envs import KNOWN_SPACES, simulator, task_spaces

LIVE = sorted(k for k in KNOWN_SPACES if k[0] in ("envpool", "gymnasium"))


@pytest.mark.parametrize(("sim", "env_id"), LIVE)
def test_known_spaces_are_the_simulators(sim: str, env_id: str) -> None:
    task = TaskConfig(simulator=sim, env_id=env_id)
    assert simulator(task).query_spaces(task) == KNOWN_SPACES[(sim, env_id)]


@pytest.mark.parametrize("task", sorted(p.stem for p in (Path(conf_dir()) / "task").glob("*.yaml")))
def test_every_shipped_envpool_and_gymnasium_task_is_in_the_table(task: str) -> None:
    """A shipped task missing from the table would make mode=plan import its simulator."""
    t = compose_config(f"task={task}").task
    if t.simulator in ("envpool", "gymnasium"):
        assert (t.simulator, t.env_id) in KNOWN_SPACES and not t.env_config
        assert task_spaces(t).continuous == t.continuous


def test_env_config_that_changes_the_spaces_asks_the_simulator() -> None:
    pong = TaskConfig(simulator="envpool", env_id="Pong-v5", continuous=False,
                      env_config={"stack_num": 2, "img_height": 42, "has_lives": True})
    sp = task_spaces(pong)
    assert (sp.obs_shape, sp.obs_dtype, sp.action_dims) == ((2, 42, 84), "uint8", (6,))
    # rl-games' own wrapper keys change nothing: the table answers
    only_wrapper = TaskConfig(simulator="envpool", env_id="Pong-v5", continuous=False, env_config={"has_lives": False})
    assert task_spaces(only_wrapper) == KNOWN_SPACES[("envpool", "Pong-v5")]
