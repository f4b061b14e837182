"""Put the fake ``nvidia-cuda-mps-control`` on PATH and read back what it was sent."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).with_name("nvidia-cuda-mps-control")
PID_FILE = "nvidia-cuda-mps-control.pid"


@dataclass
class FakeMPS:
    bin_dir: Path
    record: Path

    def sent(self) -> list[str]:
        """Every invocation ("argv -d", "argv") and command ("cmd quit"), in order."""
        if not self.record.exists():
            return []
        return [line.split(" ", 1)[1] for line in self.record.read_text().splitlines()]

    def count(self, entry: str) -> int:
        return self.sent().count(entry)


def install(tmp_path: Path, monkeypatch) -> FakeMPS:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "nvidia-cuda-mps-control"
    body = SCRIPT.read_text().split("\n", 1)[1]
    exe.write_text(f"#!{sys.executable} -IS\n{body}")  # -IS: fast start, stdlib only
    exe.chmod(0o755)
    record = tmp_path / "mps-record.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_MPS_RECORD", str(record))
    monkeypatch.delenv("FAKE_MPS_FAIL", raising=False)
    return FakeMPS(bin_dir, record)


def live_daemons(*roots: Path) -> list[int]:
    """PIDs of fake daemons still alive under ``roots`` (a test leaves none)."""
    pids = []
    for root in roots:
        for pid_file in Path(root).rglob(PID_FILE) if Path(root).exists() else []:
            try:
                pid = int(pid_file.read_text())
                os.kill(pid, 0)
                pids.append(pid)
            except (OSError, ValueError):
                pass
    return pids


def kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
