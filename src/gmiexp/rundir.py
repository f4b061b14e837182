"""Run gmiexp (or a peer that writes the same summary) in a run directory and read its ``summary.json``.

The one place where experiments, the search's profiler and the rl-games comparison start a run and
read its result: the summary file, never the human one-line summary the run prints. :func:`evaluate` plays a
finished run's final policy (``mode=eval``), the figure comparisons report beside the run-wide return
(:func:`evaluated`: that figure, or why there is none). The child runs
in its own session, its output goes to a log in the run directory, and a timeout kills the whole
process group (the GMIs too). A run that exits non-zero, times out or leaves no summary raises
:class:`RunFailed` with the log's tail. ``write_csv`` is the experiments' one CSV writer.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SUMMARY = "summary.json"
TAIL_CHARS = 3000


class RunFailed(RuntimeError):
    """A run that exited non-zero (``returncode``), timed out (``returncode`` None) or wrote no summary."""

    def __init__(self, why: str, run_dir: Path, log: Path, returncode: int | None) -> None:
        self.why, self.run_dir, self.log, self.returncode = why, run_dir, log, returncode
        super().__init__(f"{why} (run dir {run_dir}; log {log}):\n{log_tail(log)}")


def log_tail(log: Path, chars: int = TAIL_CHARS) -> str:
    """The last ``chars`` characters of the run's log ('' when there is none)."""
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def gmiexp_command(overrides: Sequence[str], run_dir: Path, python: str = sys.executable) -> list[str]:
    """``python -m gmiexp <overrides> hydra.run.dir=<run_dir>``."""
    return [python, "-m", "gmiexp", *overrides, f"hydra.run.dir={run_dir}"]


def run_gmiexp(overrides: Sequence[str], run_dir: Path, *, python: str = sys.executable,
               timeout_s: float | None = None, prefix: Sequence[str] = (), log_name: str = "console.log",
               cwd: Path | None = None) -> dict[str, Any]:
    """Run ``python -m gmiexp`` with ``overrides`` in ``run_dir``; its summary (``prefix``: e.g. a flock)."""
    return run_summary([*prefix, *gmiexp_command(overrides, run_dir, python)], run_dir,
                       timeout_s=timeout_s, log_name=log_name, cwd=cwd)


def run_summary(cmd: Sequence[str], run_dir: Path, *, timeout_s: float | None = None,
                log_name: str = "console.log", cwd: Path | None = None) -> dict[str, Any]:
    """Run ``cmd``, which writes ``run_dir/summary.json``, and return that summary (raises :class:`RunFailed`)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / log_name
    rc = run_logged(cmd, log, timeout_s, cwd)
    if rc is None:
        raise RunFailed(f"timeout after {timeout_s:.0f}s", run_dir, log, None)
    if rc != 0:
        raise RunFailed(f"exit code {rc}", run_dir, log, rc)
    return read_summary(run_dir, log)


def read_summary(run_dir: Path, log: Path | None = None) -> dict[str, Any]:
    """``run_dir/summary.json`` as a dict (:class:`RunFailed` when it is missing or unreadable)."""
    try:
        return json.loads((Path(run_dir) / SUMMARY).read_text())
    except (OSError, ValueError) as e:
        raise RunFailed(f"no summary.json: {e}", Path(run_dir), log or Path(run_dir) / "console.log", 0) from e


def run_logged(cmd: Sequence[str], log: Path, timeout_s: float | None = None, cwd: Path | None = None) -> int | None:
    """Run ``cmd`` in its own session, output to ``log``; on timeout kill the whole group. None = timed out.

    Its own session keeps a hung run killable as a group, but also out of reach of the terminal's
    Ctrl-C: when the caller itself is interrupted, the run is stopped here before re-raising.
    """
    with log.open("w") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None
        except BaseException:
            stop_group(proc)
            raise


def run_for(overrides: Sequence[str], run_dir: Path, duration_s: float, *, grace_s: float = 120.0,
            python: str = sys.executable, log_name: str = "console.log") -> dict[str, Any]:
    """Train for ``duration_s`` seconds, then stop as Ctrl-C does (the GMIs end their epoch); the summary.

    A run that ends on its own first is fine (``status: ok``); one that fails raises :class:`RunFailed`.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / log_name
    with log.open("w") as out:
        proc = subprocess.Popen(gmiexp_command(overrides, run_dir, python), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=duration_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGINT)  # the launcher's graceful stop: summary with every epoch
            try:
                rc = proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                stop_group(proc)
                raise RunFailed(f"did not stop within {grace_s:g} s of SIGINT", run_dir, log, None) from None
        except BaseException:
            stop_group(proc)
            raise
    if rc not in (0, 130):
        raise RunFailed(f"exit code {rc}", run_dir, log, rc)
    return read_summary(run_dir, log)


def stop_group(proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGINT the run's process group (gmiexp stops its GMIs and backend cleanly), then SIGKILL what is left."""

    def signal_group(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)

    signal_group(signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    signal_group(signal.SIGKILL)
    proc.wait()


def final_checkpoint(run_dir: Path) -> Path | None:
    """The newest checkpoint under ``run_dir``: rl-games' ``*.pth`` or rsl_rl's ``model_<it>.pt``, the last policy."""
    run_dir = Path(run_dir)
    found = sorted([*run_dir.rglob("*.pth"), *run_dir.rglob("model_*.pt")], key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def evaluate(run_dir: Path, overrides: Sequence[str] = (), episodes: int = 10, seed: int = 0,
             *, python: str = sys.executable) -> dict[str, Any]:
    """``mode=eval`` of the run's final policy, ``episodes`` deterministic episodes: the eval summary.

    ``overrides`` say what the policy is where the checkpoint carries no gmiexp record (a vanilla rl-games run:
    ``train=rlgames train.file=...``). The evaluation runs in ``<run_dir>/eval``.
    """
    ckpt = final_checkpoint(run_dir)
    if ckpt is None:
        raise RunFailed("no checkpoint to evaluate", Path(run_dir), Path(run_dir) / "console.log", None)
    return run_gmiexp(["mode=eval", f"checkpoint={ckpt}", f"eval.episodes={episodes}", f"seed={seed}",
                       *overrides], Path(run_dir) / "eval", python=python)


def refusal(e: RunFailed) -> str:
    """The first clause of a refused run's ``gmiexp: error:`` line, its checkpoint's path left out (else why)."""
    lines = [ln for ln in e.log.read_text(errors="replace").splitlines() if "gmiexp: error:" in ln] \
        if e.log.is_file() else []
    if not lines:
        return e.why
    return re.sub(r"checkpoint=\S+?(:|\s|$)", r"checkpoint=<the run's>\1", lines[-1].split("gmiexp: error:", 1)[1]
                  .split(";")[0].strip())


def evaluated(run_dir: Path, episodes: int, seed: int, overrides: Sequence[str] = (),
              *, python: str = sys.executable) -> tuple[float | None, str]:
    """The final policy's mean return over ``episodes`` deterministic episodes, or None and why not (``"ok"``).

    A study records a policy ``mode=eval`` refuses (exit 2: a checkpoint it cannot play) as not evaluated rather
    than stopping; any other failure raises :class:`RunFailed`. ``episodes`` 0 skips the evaluation.
    """
    if not episodes:
        return None, "skipped (eval_episodes=0)"
    try:
        ev = evaluate(run_dir, overrides, episodes, seed, python=python)
    except RunFailed as e:
        if e.returncode == 2:  # mode=eval refuses this checkpoint
            return None, f"not evaluated: mode=eval exits 2 ({refusal(e)})"
        raise
    return float(ev["metrics"]["eval/return_mean"]), "ok"


def eval_std(run_dir: Path) -> float | None:
    """The standard deviation of the episodes' returns in the run's evaluation (:func:`evaluate`), None without one.

    A mean of 10 episodes is read against its spread: one member's falls can move it more than a study's effect.
    """
    try:
        return float(read_summary(Path(run_dir) / "eval")["metrics"]["eval/return_std"])
    except (RunFailed, KeyError, TypeError, ValueError):
        return None


def results_dir(configured: str | None, script: str | Path, create: bool = True) -> Path:
    """Where a benchmark writes its CSV and report: its ``results_dir`` setting, else ``results/`` beside it.

    ``create=False`` only names it: a script that reads earlier results leaves nothing behind when they are absent.
    """
    res = Path(configured) if configured else Path(script).resolve().parent / "results"
    if create:
        res.mkdir(parents=True, exist_ok=True)
    return res


def write_report(lines: Sequence[str], path: Path) -> str:
    """A benchmark's Markdown report: ``lines`` joined, written to ``path`` and printed; returns the text."""
    text = "\n".join(lines)
    Path(path).write_text(text + "\n")
    print(text, flush=True)
    return text


def write_csv(rows: Sequence[dict[str, Any]], path: Path, fieldnames: Sequence[str] | None = None) -> Path:
    """Rows as CSV with a header (the first row's keys, or ``fieldnames``, e.g. for no rows at all)."""
    with Path(path).open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(fieldnames if fieldnames is not None else rows[0]))
        w.writeheader()
        w.writerows(rows)
    return Path(path)

def peak_memory_mb(metrics: Mapping[str, Any]) -> float:
    """Per-GMI memory the workload consumes: the GMIs' own peak device memory on a GPU, else the RSS it added.

    On a GPU host the figure is NVML's per-process memory of each GMI on its own device, at its
    peak (``gmi/<id>/peak_mem_mb``, from :mod:`gmiexp.launch.monitor`), averaged over the GMIs: neither
    the whole host's GPUs (another job's memory is not this run's) nor a mean over time (which
    start-up dilutes) measures what a GMI needs.

    On CPU the workload's RSS growth (peak minus the RSS once Python, torch and rl-games were
    loaded), not the whole RSS, is the analogue of device memory: NVML never counts the ~400 MB of
    host runtime, and with it in the denominator the search's ``R_mem`` stays near 0 at every step, so
    ``Sat = R_top / R_mem`` degenerates to the sign of the throughput change. Summaries without
    the workload metric fall back to the peak RSS.
    """
    own = [v for k, v in metrics.items() if k.startswith("gmi/") and k.endswith("/peak_mem_mb")]
    if own:
        return float(sum(own)) / len(own)
    workload = metrics.get("mem/workload_mb")
    return float(workload if workload is not None else metrics.get("mem/peak_rss_mb") or 0.0)


def on_device(metrics: Mapping[str, Any]) -> bool:
    """Whether :func:`peak_memory_mb` is device memory (NVML saw the GMIs) rather than host RSS."""
    return any(k.startswith("gmi/") and k.endswith("/peak_mem_mb") for k in metrics)
