"""``mode=search``: wire config, profiler, cache and progress bar around Algorithm 2; write the preset."""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from tqdm import tqdm

from gmiexp.config import Config, SearchConfig
from gmiexp.config.checks import validate as check_ranges
from gmiexp.errors import invalid
from gmiexp.hardware import resolve
from gmiexp.search import output
from gmiexp.search.algorithm import METHODS, Profiler, ProfileResult, SearchOutcome, design_space
from gmiexp.search.cache import ProfileCache, cached, code_version, default_cache_dir
from gmiexp.search.paired import PairRule, launch_and_steps, measured_launch_steps
from gmiexp.search.profiler import SubprocessProfiler
from gmiexp.signals import sigterm_raises

# Knobs the search itself sets (or that make no sense in a profile run): never passed through.
OWN_KEYS = ("mode", "num_gpus", "gmis_per_gpu", "num_envs", "max_iterations", "experiment", "search",
            "hydra", "launch", "logger")


def variant(cfg: Config) -> str:
    """``search.variant``: paired comparisons, the paper's Algorithm 2 or the Chinese summary's."""
    return str(cfg.search.variant)


def validate(search: SearchConfig, method: str = "paper") -> str:
    """Check the search config (its declared ranges, then what spans fields); return the method name."""
    method = "grid" if search.grid else method
    if method not in METHODS:
        raise invalid("search.variant", method, [m for m in METHODS if m != "grid"])
    check_ranges(search if isinstance(search, SearchConfig) else OmegaConf.to_object(search), "search.")
    for low, high in (("pair_min_profiles", "pair_max_profiles"),
                      ("pair_min_profiles_gmis", "pair_max_profiles_gmis")):
        if getattr(search, low) > getattr(search, high):
            raise invalid(f"search.{low}", getattr(search, low), f"at most search.{high} ({getattr(search, high)})")
    return method


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def user_overrides(cfg: Config) -> list[str]:
    """The command line's overrides minus the search's own knobs (Hydra context), else the group names."""
    try:
        from hydra.core.hydra_config import HydraConfig

        given = list(HydraConfig.get().overrides.task)
    except ValueError:  # not inside a Hydra app (tests, library use)
        given = [f"{g}={OmegaConf.select(cfg, f'{g}.name')}" for g in output.GROUPS if g != "train"]
    return [o for o in given if _key(o).split(".")[0] not in OWN_KEYS]


def group_choices(overrides: Sequence[str]) -> dict[str, str]:
    return {_key(o): o.split("=", 1)[1] for o in overrides if _key(o) in output.GROUPS}


def value_overrides(cfg: Config, overrides: Sequence[str]) -> dict[str, Any]:
    """Non-group overrides as a nested dict, with the composed config's final values."""
    values = OmegaConf.create({})
    typed = OmegaConf.structured(cfg)  # select() reads containers, not the dataclass instance
    for o in overrides:
        k = _key(o)
        if k not in output.GROUPS and not o.startswith("~"):
            OmegaConf.update(values, k, OmegaConf.select(typed, k), force_add=True)
    return OmegaConf.to_container(values, resolve=True, enum_to_str=True)  # YAML has no enums


def cache_key(cfg: Config, overrides: Sequence[str]) -> dict[str, Any]:
    hw = resolve(cfg.hardware.name)
    return {"task": [cfg.task.name, cfg.task.simulator, cfg.task.env_id], "hardware": hw.describe(),
            "cpu": platform.processor() or platform.machine(), "version": code_version(),
            "overrides": sorted(overrides),
            "iterations": [cfg.search.warmup_iterations, cfg.search.profile_iterations,
                           cfg.search.min_profile_steps, cfg.train.horizon_length, cfg.search.profile_repeats]}


def with_progress(profile: Profiler, bar: tqdm) -> Profiler:
    def run(g: int, n: int, *length: float) -> ProfileResult:
        bar.set_postfix_str(f"G={g} N={n}")
        r = profile(g, n, *length)
        bar.update(1)
        return r

    return run


def summarise(outcome: SearchOutcome, num_gpus: int, elapsed: float, alpha: float,
              min_gain: float) -> dict[str, Any]:
    return {"status": "ok" if outcome.found else "failed", "method": outcome.method,
            "alpha": alpha, "min_gain": min_gain,
            "num_envs": outcome.num_envs, "gmis_per_gpu": outcome.gmis_per_gpu, "num_gpus": num_gpus,
            "estimate_env_steps_per_s": outcome.estimate if outcome.found else None,
            "profiles": outcome.profiles, "profiles_run": sum(not s.result.cached for s in outcome.steps),
            "profile_s": outcome.profile_s, "elapsed_s": elapsed, "trace": output.trace(outcome),
            **({"cost": outcome.cost, "comparisons": outcome.comparisons} if outcome.method == "paired" else {})}


def emit_preset(cfg: Config, run_dir: Path, outcome: SearchOutcome, overrides: list[str]) -> dict[str, Any]:
    name = Path(cfg.search.output).stem
    header = (f"Chosen by gmiexp mode=search (method={outcome.method}, alpha={cfg.search.alpha}, "
              f"min_gain={cfg.search.min_gain}) "
              f"on {datetime.now():%Y-%m-%d %H:%M}.\nProjected {outcome.estimate:,.0f} env steps/s after "
              f"{outcome.profiles} profiles ({outcome.profile_s:.0f} s). Run dir: {run_dir}")
    text = output.preset_text(outcome, cfg.num_gpus, group_choices(overrides),
                              value_overrides(cfg, overrides), header)
    paths = output.write_preset(text, name, [output.preset_dir(), run_dir])
    chosen = output.chosen_overrides(outcome, cfg.num_gpus)
    return {"overrides": [*overrides, *chosen], "preset": str(paths[0]),
            "command": f"python -m gmiexp --config-dir {paths[0].parent.parent} +preset={name}"}


def run_search(cfg: Config, run_dir: Path) -> dict[str, Any]:
    """Run Algorithm 2 (or the grid) with real profiles; write search.json and the preset; return a report.

    SIGTERM is turned into KeyboardInterrupt for the search's duration, so a killed search stops
    the profile run it is waiting on (its own session) instead of orphaning it.
    """
    with sigterm_raises(lambda signum: KeyboardInterrupt(f"signal {signum}")):
        return _run_search(cfg, run_dir)


def _run_search(cfg: Config, run_dir: Path) -> dict[str, Any]:
    method = validate(cfg.search, variant(cfg))
    overrides = user_overrides(cfg)
    s = cfg.search
    profiler = SubprocessProfiler(
        workdir=Path(run_dir) / "profiles", overrides=overrides, warmup_iterations=s.warmup_iterations,
        profile_iterations=s.profile_iterations, timeout_s=s.timeout_s, min_profile_steps=s.min_profile_steps,
        horizon_length=cfg.train.horizon_length, repeats=s.profile_repeats)
    profile: Profiler = profiler
    options: dict[str, Any] = {}
    if method == "paired":  # a cached profile would pair with one taken at another time: always measure
        options = {"cost": launch_and_steps(profiler.steps, s.launch_steps), "rule": PairRule.of(s)}
    elif s.cache:
        profile = cached(profile, ProfileCache(cache_key(cfg, overrides), default_cache_dir()))
    envs = list(s.num_envs)
    t0 = time.perf_counter()
    with tqdm(total=len(design_space(s.max_gmis_per_gpu, envs)), desc=f"search[{method}]",
              unit="profile") as bar:
        search = METHODS[method]
        outcome = search(with_progress(profile, bar), s.max_gmis_per_gpu, envs, cfg.num_gpus, s.alpha,
                         s.min_gain, **options)
        bar.total = bar.n  # the search may stop before the grid's size
    if method == "paired":
        outcome.cost["launch_steps"] = s.launch_steps
        outcome.cost["launch_steps_measured"] = measured_launch_steps(outcome, profiler.steps)
    report = summarise(outcome, cfg.num_gpus, time.perf_counter() - t0, s.alpha, s.min_gain)
    if outcome.found:
        report.update(emit_preset(cfg, Path(run_dir), outcome, overrides))
    output.write_trace(Path(run_dir) / "search.json", report)
    print_report(report)
    return report


def print_report(report: dict[str, Any]) -> None:
    print(f"search[{report['method']}]: {report['profiles']} profiles ({report['profiles_run']} run, "
          f"rest cached), {report['profile_s']:.1f} s profiling, {report['elapsed_s']:.1f} s elapsed")
    if "cost" in report:
        print(f"search: {len(report['comparisons'])} paired decisions; cost {report['cost']['cost_ratio_model']:.0%} "
              "of the grid's in profile-steps")
    if report["status"] != "ok":
        print("search: no runnable configuration found (every profile failed or saturated at once)")
        return
    print(f"search: best num_envs={report['num_envs']} gmis_per_gpu={report['gmis_per_gpu']} "
          f"(projected {report['estimate_env_steps_per_s']:,.0f} env steps/s)")
    print("overrides: " + " ".join(report["overrides"]))
    print(f"preset: {report['preset']}\nrun it: {report['command']}")
