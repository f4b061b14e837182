from __future__ import annotations

from pathlib import Path

from gmiexp.metrics import MetricsLogger, WandbLogger, make_logger


def test_none_logger_is_a_noop() -> None:
    lg = make_logger({"name": "none"}, "/nonexistent", "x", {})
    assert type(lg) is MetricsLogger
    lg.log({"a": 1.0})
    lg.close()


def test_wandb_offline_writes_a_local_run(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("WANDB_MODE", raising=False)
    lg = make_logger({"name": "wandb", "project": "gmiexp-test", "mode": "offline", "tags": ["t"]},
                     str(tmp_path), "run-1", {"experiment": "exp", "task": "Cartpole"})
    assert isinstance(lg, WandbLogger)
    lg.log({"perf/env_steps_per_s": 123.0, "reward/mean": 1.5}, step=10)
    lg.summary({"perf/env_steps_per_s": 123.0})
    assert lg.run.group == "exp"
    lg.close()
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))
