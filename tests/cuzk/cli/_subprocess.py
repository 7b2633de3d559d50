"""``cuzk ARGS`` as a user runs it: a fresh process, its home and caches under a test's own
directory, and what it said checked for a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def cuzk(tmp_path: Path, *args: str | Path, stdout: int | None = subprocess.PIPE,
         **env: str) -> subprocess.CompletedProcess[str]:
    """``cuzk ARGS`` in a fresh process whose home and caches are under ``tmp_path``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CUZK_")}
    environ |= {"PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
                "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "XDG_STATE_HOME": str(tmp_path / "state"), **env}
    return subprocess.run([sys.executable, "-m", "cuzk.cli.main", *map(str, args)],
                          stdout=stdout, stderr=subprocess.PIPE, text=True, env=environ,
                          cwd=tmp_path, timeout=120)


def said(proc: subprocess.CompletedProcess[str], command: str) -> str:
    """The one line ``cuzk COMMAND:`` said (log lines aside), after a non-zero exit."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode not in (0, None), proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith(f"cuzk {command}:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    """stdout of a command that must have succeeded (its stderr shown when it did not)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
