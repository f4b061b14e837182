"""Run tags and segment names."""

import os

import pytest

from gmiexp.shm.names import ENV, launcher_tag, run_tag, segment_name


def test_bad_tag_rejected():
    with pytest.raises(ValueError, match="run tag"):
        run_tag("../etc")


def test_run_tag_precedence(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert run_tag() == f"p{os.getpid()}"
    assert run_tag(default="d1") == "d1"
    monkeypatch.setenv(ENV, "env1")
    assert run_tag(default="d1") == "env1"
    assert run_tag("arg1", default="d1") == "arg1"


def test_segment_names_unique_or_agreed():
    a, b = segment_name("ring", "t1"), segment_name("ring", "t1")
    assert a != b and a.startswith("gmiexp_t1_ring_")
    assert segment_name("mpr0", "t1", unique=False) == "gmiexp_t1_mpr0"


def test_launcher_tag_names_the_pid():
    assert launcher_tag(123).startswith("123-") and run_tag(launcher_tag())
