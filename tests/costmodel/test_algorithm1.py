import pytest
from reduction_helpers import plan_of

from gmiexp.comm.reduction import resolve, select, serving
from gmiexp.errors import ConfigError


@pytest.mark.parametrize(
    ("mpl", "expected"),
    [
        ([[0, 1, 2]], "mpr"),  # the paper's example, one GPU (line 2)
        ([[0]], "mpr"),
        ([[0, 1, 2], [3, 4, 5], [6, 7, 8]], "mrr"),  # the paper's MPL: t = 3 <= g = 3 (line 14)
        ([[0, 1, 2], [3, 4, 5]], "har"),  # t = 3 > g = 2 (line 11)
        ([[0, 1], [2, 3]], "mrr"),  # 2G2T
        ([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]], "mrr"),  # 4G4T
        ([[0], [1], [2], [3]], "mrr"),  # one GMI per GPU: one ring
        ([[0, 1, 2], [3, 4]], "har"),  # uneven (line 8)
        ([[0], [1, 2]], "har"),
    ],
)
def test_algorithm1_on_paper_layouts(mpl, expected):
    choice, reason = select(mpl)
    assert choice == expected
    assert "Algorithm 1" in reason


def test_auto_resolves_over_the_trainer_gpu_map():
    assert resolve("auto", plan_of([3, 3]))[0] == "har"
    assert resolve("auto", plan_of([2, 2]))[0] == "mrr"
    assert resolve("auto", plan_of([4]))[0] == "mpr"
    # only the trainers count: GMI 2 (alone on GPU 1) is not a trainer -> one GPU -> MPR
    p = plan_of([2, 1], trainers=[0, 1])
    name, reason = resolve("auto", p)
    assert name == "mpr" and "[[0, 1]]" in reason


def test_mrr_refusal_names_the_limit_and_the_alternatives():
    with pytest.raises(ConfigError) as e:
        resolve("mrr", plan_of([3, 3]))
    msg = str(e.value)
    assert "GMIs per GPU <= GPUs" in msg and "3 GMIs per GPU on 2 GPUs" in msg
    assert "valid for this layout: mpr, har, allreduce, auto" in msg
    with pytest.raises(ConfigError, match="same number of GMIs on every GPU"):
        resolve("mrr", plan_of([2, 1]))
    assert ConfigError.exit_code == 2


def test_explicit_strategies_and_bad_names():
    assert resolve("mrr", plan_of([2, 2]))[0] == "mrr"
    assert resolve("har", plan_of([3, 1]))[0] == "har"
    assert serving(plan_of([2, 2])) == ["mpr", "mrr", "har", "allreduce"]
    with pytest.raises(ConfigError, match="valid: allreduce, har, mpr, mrr, auto"):
        resolve("ring", plan_of([2]))


@pytest.mark.parametrize(("over", "want", "why"), [
    (["hardware=h100x8", "num_gpus=2", "gmis_per_gpu=2", "backend=mps"], "mrr", "auto (Algorithm 1): 2 GMIs per GPU"),
    (["hardware=h200x1", "gmis_per_gpu=3", "backend=mps"], "mpr", "all 3 trainer GMIs on one GPU -> MPR"),
    (["hardware=dgx_a100", "num_gpus=2", "gmis_per_gpu=3", "backend=mps"], "har", "3 GMIs per GPU > 2 GPUs"),
    (["hardware=cpu", "num_gpus=2", "gmis_per_gpu=2"], "allreduce", "the GMIs run on CPU cores (this host has no GPU)"),
    (["hardware=h100x8", "num_gpus=2", "gmis_per_gpu=2", "train.device=cpu"], "allreduce", "(train.device=cpu)"),
])
def test_the_default_reduction_follows_algorithm_1_on_gpus_and_stays_allreduce_on_cpu(tmp_path, over, want, why):
    """No reduction= given: GPU hosts get Algorithm 1's pick (Table 2: MRR up to 7x faster than the host all-reduce)."""
    from gmitest import compose_config

    from gmiexp.planner.build import build_plan

    plan, _ = build_plan(compose_config("mode=plan", "task=Cartpole", *over), tmp_path)
    assert plan.reduction == want and why in plan.reduction_reason, plan.reduction_reason
