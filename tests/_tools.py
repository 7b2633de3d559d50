"""External tools the integration tests need: skip on a laptop without them, fail in CI."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str, path: str | None = None, hint: str = "") -> str:
    """``path`` (or ``name`` on PATH); a missing tool skips the test, but fails it when CI=true."""
    found = path or shutil.which(name)
    if found:
        return found
    msg = f"{name} not found" + (f" ({hint})" if hint else "")
    if os.environ.get("CI") == "true":
        pytest.fail(msg + "; CI must install it")
    pytest.skip(msg)
