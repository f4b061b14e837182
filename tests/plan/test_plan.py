from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gmiexp.config import TaskConfig
from gmiexp.errors import ConfigError
from gmiexp.plan import GMI, Plan


def make_plan(n: int = 3) -> Plan:
    gmis = [GMI(id=i, device=i // 2, local_index=i % 2, roles=["simulator", "agent", "trainer"], num_envs=8)
            for i in range(n)]
    return Plan(gmis=gmis, layout="tcg_ex", backend="direct", reduction="allreduce",
                trainer_group=list(range(n)), task=TaskConfig(name="Cartpole"))


def test_yaml_round_trip(tmp_path: Path) -> None:
    p = make_plan()
    p.gmis[1].env["CUDA_VISIBLE_DEVICES"] = "0"
    p.gmis[2].cpus = [1]
    path = p.save(tmp_path / "plan.yaml")
    q = Plan.load(path)
    assert q == p
    assert q.plan_id == p.plan_id


def test_gpu_map_is_algorithm1_input() -> None:
    assert make_plan(5).gpu_map() == [[0, 1], [2, 3], [4]]
    assert make_plan(5).gpu_map([1, 2, 3]) == [[1], [2, 3]]


def test_plan_id_ignores_run_dir_but_not_content() -> None:
    a, b = make_plan(), make_plan()
    b.run_dir = "/elsewhere"
    assert a.plan_id == b.plan_id
    b.gmis[0].num_envs = 9
    assert a.plan_id != b.plan_id


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p.gmis[0].roles.append("critic"),
         "invalid role of GMI 0: 'critic'; valid: simulator, agent, trainer"),
        (lambda p: setattr(p.gmis[1], "num_envs", 0), "invalid num_envs of GMI 1: 0"),
        (lambda p: setattr(p.gmis[2], "id", 7), "invalid GMI ids"),
        (lambda p: p.trainer_group.append(9), "invalid trainer_group member: 9"),
        (lambda p: setattr(p.gmis[0], "roles", ["simulator", "agent"]), "has no trainer role"),
        (lambda p: p.channels.append([0, 5]), "invalid channel: [0, 5]"),
        (lambda p: p.gmis.clear(), "the plan has no GMIs"),
    ],
)
def test_validation_names_the_bad_value(mutate, message: str) -> None:
    p = make_plan()
    mutate(p)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        p.validate()


def test_unknown_field_in_yaml_is_rejected() -> None:
    d = make_plan().to_dict()
    d["colour"] = "blue"
    with pytest.raises(ConfigError, match="invalid plan field: 'colour'"):
        Plan.from_dict(d)


def test_planning_a_builtin_role_does_not_import_rl_games(tmp_path: Path) -> None:
    """The launcher process never runs a role; importing rl-games there costs every launch ~1.5 s."""
    code = ("import sys, pathlib; from gmiexp.config.compose import compose_config; "
            "from gmiexp.planner.build import build_plan; "
            f"build_plan(compose_config('task=Cartpole', 'hardware=cpu'), pathlib.Path({str(tmp_path)!r})); "
            "print(sorted(m for m in sys.modules if m.startswith(('rl_games.torch_runner', 'rl_games.algos_torch', "
            "'rl_games.common.env_configurations', 'torch._dynamo'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
