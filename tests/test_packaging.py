"""The wheel carries conf/ (an installed gmiexp finds its Hydra configs) and the gmiexp_pack launcher plugin."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_packages_conf(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                   check=True, timeout=600)
    wheel = next(tmp_path.glob("gmiexp-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    conf = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "conf").rglob("*.yaml"))
    assert conf and all(f"gmiexp/{c}" in names for c in conf)
    assert "gmiexp/__main__.py" in names
    # the launcher plugin, in Hydra's namespace package (no hydra_plugins/__init__.py: other plugins share it)
    assert {"hydra_plugins/gmiexp_pack/config.py", "hydra_plugins/gmiexp_pack/pack_launcher.py"} <= names
    assert "hydra_plugins/__init__.py" not in names


def test_conf_dir_found_from_source_tree() -> None:
    from gmiexp.config.compose import conf_dir

    assert (Path(conf_dir()) / "config.yaml").is_file()
