"""Each extension point takes one file outside src/: a layout, a backend, a reduction and a simulator.

``tests/helpers/ext_{layout,backend,reduction,simulator}.py`` each define one class; nothing in src/ names
them. A registry takes ``"module:Class"`` as the name itself (as ``role=`` does), imported wherever it is
looked up: the launcher (layout, backend) and every GMI process (reduction, simulator), which find the
module on ``PYTHONPATH`` (``gmitest.cli_env`` puts tests/helpers there). Each is planned alone
(``mode=plan`` with ``<group>.name=module:Class``); one real run trains with all four, selected as config-group
options from YAML files in a directory of the test's own (``hydra.searchpath``), as a user's project would.
"""

from __future__ import annotations

import json
from pathlib import Path

import ext_backend
import ext_layout
import ext_reduction
import ext_simulator
import pytest
import yaml
from gmitest import compose_config, run_cli

from gmiexp.app import run
from gmiexp.backends import BACKENDS
from gmiexp.comm.reduction import REDUCTIONS
from gmiexp.envs import SIMULATORS
from gmiexp.layouts import LAYOUTS
from gmiexp.plan import Plan

SIZES = ["task=Cartpole", "hardware=cpu", "num_gpus=1", "gmis_per_gpu=1", "num_envs=16"]
DRIFT = ["task.name=Drift", f"task.simulator={ext_simulator.SPEC}", "task.env_id=Drift"]


def plan_of(tmp_path: Path, capsys: pytest.CaptureFixture[str], *overrides: str) -> Plan:
    """``mode=plan`` in this process: exit 0, and the Plan it printed."""
    code = run(compose_config("mode=plan", *SIZES, *overrides), tmp_path)
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    return Plan.from_dict(yaml.safe_load(out))


def test_a_layout_in_one_file_is_planned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_of(tmp_path, capsys, f"layout.name={ext_layout.SPEC}", "num_gpus=2")
    assert plan.layout == ext_layout.SPEC and plan.role == "ppo"  # the layout's default role
    assert plan.gpu_map(plan.trainer_group) == [[0, 1], [2, 3]]  # two GMIs per GPU at gmis_per_gpu=1
    assert [g.num_envs for g in plan.gmis] == [8] * 4
    assert LAYOUTS.knows(ext_layout.SPEC) and ext_layout.SPEC not in LAYOUTS  # named by where it lives, not registered
    assert ext_layout.SPEC not in LAYOUTS.names()


def test_a_backend_in_one_file_is_planned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_of(tmp_path, capsys, f"backend.name={ext_backend.SPEC}", "gmis_per_gpu=2")
    assert plan.backend == ext_backend.SPEC and plan.backend_reason.startswith("ext_backend")
    assert [g.env[ext_backend.ENV] for g in plan.gmis] == ["0", "1"]
    assert all(g.share.startswith(f"labelled {g.id}") for g in plan.gmis)
    assert ext_backend.SPEC not in BACKENDS.names()


def test_a_reduction_in_one_file_is_planned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_of(tmp_path, capsys, f"reduction.name={ext_reduction.SPEC}", "gmis_per_gpu=2")
    assert plan.reduction == ext_reduction.SPEC and "requested" in plan.reduction_reason
    assert ext_reduction.SPEC not in REDUCTIONS.names()


def test_a_simulator_in_one_file_is_planned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_of(tmp_path, capsys, *DRIFT)
    assert plan.task.simulator == ext_simulator.SPEC and plan.task.env_id == "Drift"
    assert plan.notes["policy_params"] > 0  # sized from the simulator's spaces (2 observations, 3 actions)
    assert ext_simulator.SPEC not in SIMULATORS.names()
    code = run(compose_config("mode=plan", *SIZES, *DRIFT, "task.env_id=Cartpole"), tmp_path)  # its own check
    assert code == 2 and "valid: Drift" in capsys.readouterr().err


@pytest.mark.parametrize(("override", "says"), [
    ("layout.name=no_such_module:Twins", "cannot import module 'no_such_module'"),
    (f"reduction.name={ext_reduction.__name__}:Nope", f"module '{ext_reduction.__name__}' has no 'Nope'"),
])
def test_a_bad_module_class_name_exits_2_saying_why(override: str, says: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert run(compose_config("mode=plan", *SIZES, override), tmp_path) == 2
    assert says in capsys.readouterr().err


def search_path(root: Path) -> Path:
    """Config-group options naming the four classes: what a user's own ``conf/`` directory would hold."""
    options = {
        "layout/ext_twins.yaml": {"defaults": ["/layout_schema@_here_", "_self_"], "name": ext_layout.SPEC},
        "backend/ext_labelled.yaml": {"defaults": ["/backend_direct_schema@_here_", "_self_"],
                                      "name": ext_backend.SPEC},
        "reduction/ext_sum.yaml": {"defaults": ["/reduction_schema@_here_", "_self_"], "name": ext_reduction.SPEC},
        "task/Drift.yaml": {"defaults": ["/task_schema@_here_", "_self_"], "name": "Drift",
                            "simulator": ext_simulator.SPEC, "env_id": "Drift", "mlp_units": [16, 16],
                            "max_episode_length": 8, "continuous": False},
    }
    for rel, node in options.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(yaml.safe_dump(node, sort_keys=False))
    return root


def test_the_four_train_together(tmp_path: Path, no_orphans: None) -> None:
    """Twins' two GMIs (8 envs each, from gmis_per_gpu=1 num_envs=16) step Drift, labelled by the backend,
    and reduce their gradients with CountingSum, whose results are the sums of the two GMIs' gradients."""
    conf, sims, run_dir = search_path(tmp_path / "conf"), tmp_path / "sims", tmp_path / "run"
    sims.mkdir()
    r = run_cli(f"hydra.searchpath=[file://{conf}]", "layout=ext_twins", "backend=ext_labelled",
                "reduction=ext_sum", "task=Drift", "hardware=cpu", "num_gpus=1", "gmis_per_gpu=1", "num_envs=16",
                "max_iterations=2", "train.horizon_length=16", "train.minibatch_size=64", "train.mini_epochs=2",
                "launch.progress=false", f"hydra.run.dir={run_dir}", env={"EXT_SIM_DIR": str(sims)})
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    plan = Plan.load(run_dir / "plan.yaml")
    assert summary["status"] == "ok" and summary["metrics"]["perf/env_steps_per_s"] > 0
    assert (plan.layout, plan.backend, plan.reduction, plan.task.simulator) == \
        (ext_layout.SPEC, ext_backend.SPEC, ext_reduction.SPEC, ext_simulator.SPEC)
    assert summary["config"]["layout"] == ext_layout.SPEC

    # the layout's GMIs ran: two processes, each stepping its 8 environments of the simulator
    assert [g.num_envs for g in plan.gmis] == [8, 8]
    stepped = [json.loads(p.read_text()) for p in sorted(sims.glob("sim_*.json"))]
    assert sorted(s["num_envs"] for s in stepped) == [8, 8] and len({s["pid"] for s in stepped}) == 2
    assert all(s["steps"] >= 2 * 16 for s in stepped)  # max_iterations x horizon_length steps at least
    # the backend's per-GMI environment reached each GMI, and its session set up and tore down
    assert sorted(s["backend_gmi"] for s in stepped) == ["0", "1"]
    assert json.loads((run_dir / ext_backend.SESSION_FILE).read_text()) == \
        {"plan_id": plan.plan_id, "set_up": True, "torn_down": True}
    # every gradient went through the reduction: 2 epochs x 2 mini-epochs x (16 x 8 / 64) minibatches, and
    # each result is the sum of the two GMIs' gradients (the agent then averages it)
    red = {int(p.stem[3:]): json.loads(p.read_text()) for p in (run_dir / ext_reduction.DIR).glob("gmi*.json")}
    assert sorted(red) == [0, 1] and all(red[k]["rank"] == k and red[k]["backend_gmi"] == str(k) for k in red)
    assert len(red[0]["pre"]) == len(red[1]["pre"]) == 2 * 2 * 2
    assert red[0]["post"] == pytest.approx(red[1]["post"], rel=1e-9)
    sums = [a + b for a, b in zip(red[0]["pre"], red[1]["pre"], strict=True)]
    assert red[0]["post"] == pytest.approx(sums, rel=1e-4, abs=1e-6)
    assert red[0]["pre"] != pytest.approx(red[1]["pre"])  # the GMIs' gradients differ: a real reduction
