"""What a ``cuzk`` run that must have succeeded printed (helpers beside ``_cli``)."""

from __future__ import annotations

import subprocess


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    """stdout of a command that must have succeeded (its stderr shown when it did not)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
