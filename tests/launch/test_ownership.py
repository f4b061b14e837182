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
    monkeypatch.setitem(ownership.found, "top", ownership.first_missing(run_dir))
    assert ownership.found["top"] == tmp_path / "outputs"
    hydra_wrote(run_dir)
    assert ownership.discard_refused(run_dir, "__main__.log")
    assert list(tmp_path.iterdir()) == []


def test_a_run_dir_that_existed_or_where_something_ran_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ownership.found, "top", ownership.first_missing(tmp_path))  # a run resumed here
    assert ownership.found["top"] is None
    hydra_wrote(tmp_path)
    assert not ownership.discard_refused(tmp_path, "__main__.log")
    fresh = tmp_path / "new"
    monkeypatch.setitem(ownership.found, "top", ownership.first_missing(fresh))
    hydra_wrote(fresh)
    (fresh / "gmis").mkdir()  # something launched before the refusal (a GMI's own): its logs are kept
    assert not ownership.discard_refused(fresh, "__main__.log")
    assert (fresh / ".hydra").is_dir() and (tmp_path / ".hydra").is_dir()


def test_an_existing_run_dirs_hydra_record_is_put_back_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, bare = tmp_path / "run", tmp_path / "bare"
    hydra_wrote(run)
    (run / ".hydra" / "config.yaml").write_text("seed: 7\n")
    bare.mkdir()  # a dir the user made: no record of its own
    for d, record in ((run, {"overrides.yaml": "- gmis_per_gpu=0\n", "config.yaml": "seed: 7\n"}), (bare, None)):
        monkeypatch.setitem(ownership.found, "top", ownership.first_missing(d))
        monkeypatch.setitem(ownership.found, "subdir", d / ".hydra")
        monkeypatch.setitem(ownership.found, "record", ownership.hydra_record(d / ".hydra"))
        (d / ".hydra").mkdir(exist_ok=True)  # Hydra writes this command's record
        for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
            (d / ".hydra" / name).write_text("refused\n")
        assert not ownership.discard_refused(d, "__main__.log")
        if record is None:
            assert not (d / ".hydra").exists()
        else:
            assert {p.name: p.read_text() for p in (d / ".hydra").iterdir()} == record


def test_a_refused_sweep_is_removed_only_when_no_job_left_more_than_hydras_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = tmp_path / "multirun" / "x"
    monkeypatch.setitem(ownership.found, "sweep_top", ownership.first_missing(sweep))
    for job in ("0", "1"):
        hydra_wrote(sweep / job)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    (sweep / "0" / "summary.json").write_text("{}")  # job 0 ran; job 1 refused
    assert not ownership.discard_refused_sweep(sweep, "__main__.log")
    assert (sweep / "0" / "summary.json").is_file() and (sweep / "1" / ".hydra").is_dir()
    (sweep / "0" / "summary.json").unlink()
    assert ownership.discard_refused_sweep(sweep, "__main__.log")
    assert list(tmp_path.iterdir()) == []
