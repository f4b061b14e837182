"""run_search wiring (profiler injected), validation, and the preset it writes composing through Hydra."""

import json

import pytest
from hydra import compose, initialize_config_dir

import gmiexp.search.runner as runner
from gmiexp.config.registration import register_configs
from gmiexp.errors import ConfigError
from gmiexp.search import ProfileResult

CONF = str(__import__("pathlib").Path(__file__).resolve().parents[2] / "conf")
SPACE = ["search.max_gmis_per_gpu=2", "search.num_envs=[64,128,256,512,1024]"]


def make_cfg(*overrides, searchpath=None):
    register_configs()
    extra = [f"hydra.searchpath=[file://{searchpath}]"] if searchpath else []
    with initialize_config_dir(CONF, version_base=None):
        return compose("config", overrides=["task=Cartpole", "hardware=cpu", *overrides, *extra])


class FakeProfiler:
    """Stands in for SubprocessProfiler: knee at 256 envs per GMI, two GMIs beat one."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.lengths = []

    def __call__(self, g, n, length=1.0):
        self.lengths.append(length)
        return ProfileResult(True, top={1: 10.0, 2: 7.0}[g] * min(n, 256), mem_mb=200 + n / 4, wall_s=1.0)

    def steps(self, g, n, length=1.0):
        return 4 * g * n * 16 * length


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("GMIEXP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GMIEXP_PRESET_DIR", str(tmp_path / "presets"))
    monkeypatch.setattr(runner, "SubprocessProfiler", FakeProfiler)
    return tmp_path


def test_run_search_picks_writes_trace_and_preset(isolated, capsys):
    cfg = make_cfg(*SPACE, "search.output=cp.yaml", "train.horizon_length=32", "search.variant=paper")
    report = runner.run_search(cfg, isolated / "run")
    assert (report["num_envs"], report["gmis_per_gpu"]) == (256, 2)
    assert report["profiles"] == 8 and report["profile_s"] == 8.0
    assert json.loads((isolated / "run" / "search.json").read_text())["num_envs"] == 256
    out = capsys.readouterr().out
    assert "gmis_per_gpu=2" in out and "+preset=cp" in out
    again = runner.run_search(cfg, isolated / "run2")
    assert again["profiles_run"] == 0  # all from the cache


def test_paired_is_the_default_and_records_its_decisions(isolated, capsys):
    """Past the knee the rows are flat, so the paired search may climb the plateau; it must pick the better row."""
    cfg = make_cfg(*SPACE, "search.budget=1.0", "search.launch_steps=1000")
    report = runner.run_search(cfg, isolated / "run")
    assert report["method"] == "paired" and report["gmis_per_gpu"] == 2 and report["num_envs"] >= 256
    saved = json.loads((isolated / "run" / "search.json").read_text())
    kinds = [(c["kind"], c["decision"], c["reason"]) for c in saved["comparisons"]]
    assert ("gmis", "candidate", "decisive") in kinds and ("num_envs", "candidate", "decisive") in kinds
    assert all(c["profiles"] and (c["ratio"] or 0) > 0 for c in saved["comparisons"] if c["reason"] != "out of budget")
    assert 0 < saved["cost"]["cost_ratio_model"] <= 1.0 and "launch_steps_measured" in saved["cost"]
    assert "paired decisions" in capsys.readouterr().out
    again = runner.run_search(cfg, isolated / "run2")
    assert again["profiles_run"] == again["profiles"]  # a paired decision never pairs with a cached profile


def test_paired_profiles_are_shortened(isolated, monkeypatch):
    made = []
    monkeypatch.setattr(runner, "SubprocessProfiler", lambda **kw: made.append(FakeProfiler(**kw)) or made[-1])
    runner.run_search(make_cfg(*SPACE, "search.pair_length=0.25"), isolated / "run")
    assert set(made[0].lengths) == {0.25}


def test_preset_composes_to_the_chosen_config(isolated):
    runner.run_search(make_cfg(*SPACE, "search.output=cp.yaml", "train.horizon_length=32", "search.variant=paper"),
                      isolated / "run")
    cfg = make_cfg("+preset=cp", "experiment=x", searchpath=isolated / "presets")
    assert (cfg.num_envs, cfg.gmis_per_gpu, cfg.num_gpus) == (256, 2, 1)
    assert cfg.task.name == "Cartpole" and cfg.experiment == "x"


def test_value_overrides_carry_final_values():
    cfg = make_cfg("train.horizon_length=32", "task.mlp_units=[8,8]")
    values = runner.value_overrides(cfg, ["task=Cartpole", "train.horizon_length=32", "task.mlp_units=[8,8]"])
    assert values == {"train": {"horizon_length": 32}, "task": {"mlp_units": [8, 8]}}


def test_passthrough_drops_the_search_knobs():
    cfg = make_cfg(*SPACE)
    assert runner.user_overrides(cfg)[0] == "task=Cartpole"
    assert not any(o.startswith(("num_envs", "mode", "search")) for o in runner.user_overrides(cfg))


@pytest.mark.parametrize(("override", "what"), [
    ("search.num_envs=[256,128]", "search.num_envs"),
    ("search.num_envs=[]", "search.num_envs"),
    ("search.max_gmis_per_gpu=0", "search.max_gmis_per_gpu"),
    ("search.profile_repeats=0", "search.profile_repeats"),
    ("search.min_profile_steps=-1", "search.min_profile_steps"),
    ("search.min_gain=1.5", "search.min_gain"),
    ("search.budget=0", "search.budget"),
    ("search.budget=1.5", "search.budget"),
    ("search.pair_length=0", "search.pair_length"),
    ("search.pair_z=0", "search.pair_z"),
    ("search.pair_noise=-0.1", "search.pair_noise"),
    ("search.pair_tolerance=1", "search.pair_tolerance"),
    ("search.pair_plateau=-0.1", "search.pair_plateau"),
    ("search.pair_max_profiles=1", "search.pair_max_profiles"),
    ("search.pair_max_profiles_gmis=1", "search.pair_max_profiles_gmis"),
    ("search.launch_steps=-1", "search.launch_steps"),
])
def test_bad_search_config_is_a_config_error(override, what):
    with pytest.raises(ConfigError, match=what):
        runner.validate(make_cfg(override).search)


def test_search_variant_cn(isolated):
    cfg = make_cfg(*SPACE, "search.variant=cn")
    assert runner.validate(cfg.search, runner.variant(cfg)) == "cn"
    assert runner.run_search(cfg, isolated / "run")["method"] == "cn"
    assert "search.variant=cn" not in runner.user_overrides(cfg)
    with pytest.raises(ConfigError, match="search.variant"):
        runner.validate(cfg.search, "bogus")


def test_value_overrides_reads_the_typed_config() -> None:
    """A search with a plain key override (train.mini_epochs=1) crashed after profiling: select() on a dataclass."""
    from gmitest import compose_config

    from gmiexp.search.runner import value_overrides

    cfg = compose_config("task=Cartpole", "train.mini_epochs=1", "num_envs=32")
    assert value_overrides(cfg, ["task=Cartpole", "train.mini_epochs=1", "num_envs=32"]) == {
        "train": {"mini_epochs": 1}, "num_envs": 32}
