"""Run ``cuzk`` as a user does: a fresh process, its own home and caches, no CUZK_ settings
from the developer's shell; and read the one line it says on failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def cuzk(tmp_path: Path, *args: str, stdout: int | None = subprocess.PIPE,
         **env: str) -> subprocess.CompletedProcess[str]:
    """``cuzk ARGS`` in a fresh process whose home and caches are under ``tmp_path``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CUZK_")}
    environ |= {"PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
                "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "XDG_STATE_HOME": str(tmp_path / "state"), **env}
    return subprocess.run([sys.executable, "-m", "cuzk.cli.main", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, env=environ, cwd=tmp_path,
                          timeout=120)


def said(proc: subprocess.CompletedProcess[str], command: str) -> str:
    """The one line ``cuzk COMMAND:`` said (log lines aside), after a non-zero exit."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode not in (0, None), proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith(f"cuzk {command}:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def json_out(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON object a ``--json`` run printed: stdout holds it and nothing else."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    data = json.loads(lines[0])
    assert isinstance(data, dict)
    assert data["ok"] is (proc.returncode == 0), (data, proc.returncode)
    return data
