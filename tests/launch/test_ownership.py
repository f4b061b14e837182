"""The run directory's ownership: what a refused command leaves of the run dir Hydra made for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gmiexp.launch import ownership


def hydra_wrote(run_dir: Path) -> None:
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text("- gmis_per_gpu=0\n")
    (run_dir / "__main__.log").write_text("")


def test_a_refused_command_removes_only_the_dirs_it_created_holding_only_hydras_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "outputs" / "exp" / "run"
    monkeypatch.setitem(ownership.created, "top", ownership.first_missing(run_dir))
    assert ownership.created["top"] == tmp_path / "outputs"
    hydra_wrote(run_dir)
    assert ownership.discard_refused(run_dir, "__main__.log")
    assert list(tmp_path.iterdir()) == []


def test_a_run_dir_that_existed_or_where_something_ran_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ownership.created, "top", ownership.first_missing(tmp_path))  # a run resumed here
    assert ownership.created["top"] is None
    hydra_wrote(tmp_path)
    assert not ownership.discard_refused(tmp_path, "__main__.log")
    fresh = tmp_path / "new"
    monkeypatch.setitem(ownership.created, "top", ownership.first_missing(fresh))
    hydra_wrote(fresh)
    (fresh / "gmis").mkdir()  # something launched before the refusal (a GMI's own): its logs are kept
    assert not ownership.discard_refused(fresh, "__main__.log")
    assert (fresh / ".hydra").is_dir() and (tmp_path / ".hydra").is_dir()
