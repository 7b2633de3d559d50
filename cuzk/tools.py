"""Commands cuzk runs as child processes: its own modules in a fresh interpreter, and the
optional node tools (snarkjs) that tests and benchmarks compare against."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent


def python_module_command(module: str, *args: str) -> list[str]:
    """``python -P -m module args``: this interpreter running one of cuzk's modules. ``-P``
    keeps the working directory off ``sys.path``, so a child started in a directory that holds
    a checkout of cuzk (or any ``cuzk/``) imports the installed package, not that one."""
    return [sys.executable, "-P", "-m", module, *args]


def find_snarkjs() -> str | None:
    """The repository's pinned snarkjs (node_modules/.bin) first, else one on PATH."""
    local = _REPO / "node_modules" / ".bin" / "snarkjs"
    if local.exists():
        return str(local)
    return shutil.which("snarkjs")


def snarkjs_timer_script() -> Path | None:
    """benchmarks/snarkjs_prove.mjs: times groth16.prove inside one warm node process."""
    script = _REPO / "benchmarks" / "snarkjs_prove.mjs"
    return script if script.exists() and (_REPO / "node_modules" / "snarkjs").exists() else None
