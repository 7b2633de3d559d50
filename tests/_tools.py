"""External tools the integration tests need: skip on a laptop without them, fail in CI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

NODE_MODULES = Path(__file__).resolve().parents[1] / "node_modules"


def require_tool(name: str, path: str | None = None, hint: str = "") -> str:
    """``path``, or ``name`` on PATH when ``path`` is None; a missing tool skips the test, but
    fails it when CI=true. ``path=""`` means the caller already knows the tool is missing."""
    found = path if path is not None else shutil.which(name)
    if found:
        return found
    _missing(f"{name} not found" + (f" ({hint})" if hint else ""))
    raise AssertionError("unreachable")


def require_node_modules(*packages: str) -> Path:
    """``node`` on PATH and each package installed in the repository's ``node_modules``
    (``npm ci``): node alone is not enough for tests that import snarkjs's libraries."""
    missing = [] if shutil.which("node") else ["node"]
    missing += [p for p in packages if not (NODE_MODULES / p / "package.json").is_file()]
    if missing:
        _missing(
            f"{', '.join(missing)} not found (node on PATH and node_modules from `npm ci` in"
            " the repository)"
        )
    return NODE_MODULES


def node_bin(package: str, command: str | None = None) -> str:
    """The path of a node package's command in ``node_modules/.bin`` (skips/fails if absent)."""
    require_node_modules(package)
    exe = NODE_MODULES / ".bin" / (command or package)
    if not exe.exists():
        _missing(f"{exe} not found (npm ci in the repository)")
    return str(exe)


def _missing(msg: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(msg + "; CI must install it")
    pytest.skip(msg)
