"""Every field of every schema declares its valid range, and each declared range refuses bad values with exit 2."""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import pytest
from gmitest import NEEDS, compose_config

from gmiexp.app import run
from gmiexp.config.checks import declared, undeclared, validate
from gmiexp.config.compose import conf_dir
from gmiexp.config.schema import BACKEND_SCHEMAS, GROUP_SCHEMAS, Config
from gmiexp.errors import ConfigError


def schema_fields(node: object, prefix: str = "") -> list[tuple[str, type, str]]:
    """(dotted path, owning schema, field name) for every field below ``node``."""
    out = []
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if dataclasses.is_dataclass(value):
            out += schema_fields(value, f"{prefix}{f.name}.")
        else:
            out.append((f"{prefix}{f.name}", type(node), f.name))
    return out


DEFAULT = compose_config()
FIELDS = schema_fields(DEFAULT)
SCHEMAS = sorted({schema for _, schema, _ in FIELDS} | {Config, *BACKEND_SCHEMAS.values()}, key=lambda s: s.__name__)
BAD = [(path, bad) for path, schema, name in FIELDS if name in declared(schema)
       for bad in declared(schema)[name].bad_examples()]


def with_value(path: str, value: object) -> Config:
    cfg = copy.deepcopy(DEFAULT)
    *parents, leaf = path.split(".")
    node = cfg
    for p in parents:
        node = getattr(node, p)
    setattr(node, leaf, value)
    return cfg


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.__name__)
def test_every_field_declares_its_range(schema: type) -> None:
    """A new field fails here until its schema's @ranges names it (bools and nested schemas excepted)."""
    assert undeclared(schema) == []
    assert set(declared(schema)) <= {f.name for f in dataclasses.fields(schema)}, "a range for no field"


def test_every_field_is_covered_by_a_bad_example() -> None:
    free = {path for path, schema, name in FIELDS if name in declared(schema)
            and not declared(schema)[name].bad_examples()}
    assert free == {"extra"}  # the one deliberately free-form field


@pytest.mark.parametrize(("path", "bad"), BAD, ids=[f"{p}={b!r}" for p, b in BAD])
def test_bad_value_exits_2_naming_field_and_range(path: str, bad: object, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = run(with_value(path, bad), tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err
    shown = "nan" if isinstance(bad, float) and math.isnan(bad) else repr(bad)
    assert f"invalid {path}: {shown}; valid: " in err
    assert not (tmp_path / "plan.yaml").exists() and not (tmp_path / "gmis").exists()


def test_several_bad_values_are_refused_at_once_in_the_schema_s_order(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A command with three bad values names all three, so one edit mends it; nothing is planned."""
    code = run(compose_config("train.gamma=2.0", "seed=-2", "num_envs=0"), tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err
    assert ("gmiexp: error: 3 invalid settings (nothing was launched):\n"
            "  invalid seed: -2; valid: -1..4294967295\n"
            "  invalid num_envs: 0; valid: >= 1 (environments per GMI)\n"
            "  invalid train.gamma: 2.0; valid: 0..1\n") in err
    assert not (tmp_path / "plan.yaml").exists() and not (tmp_path / "gmis").exists()


def test_several_unknown_keys_are_refused_at_once() -> None:
    with pytest.raises(ConfigError) as e:
        compose_config("+train.devize=lazy", "+device=x")
    lines = str(e.value).splitlines()
    assert lines[0] == "2 invalid keys (nothing was launched):"
    assert lines[1].startswith("  invalid key: 'train.devize'; valid: activation, algo,")
    assert lines[2].startswith("  invalid key: 'device'; valid: async_train, backend,")
    assert lines[2].endswith(". a new key needs a field in its schema (src/gmiexp/config/schema.py)")


@pytest.mark.parametrize("option", sorted(BACKEND_SCHEMAS))
def test_every_backend_option_refuses_bad_values(option: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The fields of mps, mig and auto, which the default (direct) config above does not have."""
    base = compose_config(f"backend={option}")
    for name, check in declared(type(base.backend)).items():
        for bad in check.bad_examples():
            cfg = copy.deepcopy(base)
            setattr(cfg.backend, name, bad)
            assert run(cfg, tmp_path) == 2
            assert f"invalid backend.{name}: " in capsys.readouterr().err


def group_options() -> list[tuple[str, str]]:
    root = Path(conf_dir())
    return [(g, p.stem) for g in GROUP_SCHEMAS for p in sorted((root / g).glob("*.yaml"))]


@pytest.mark.parametrize(("group", "option"), group_options())
def test_every_shipped_option_is_in_range(group: str, option: str) -> None:
    validate(compose_config(f"{group}={option}", *NEEDS.get((group, option), [])))
