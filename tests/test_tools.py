"""tests/_tools.py: a test needing node modules checks for them, not only for `node`, and a
missing tool fails the test when CI=true instead of skipping it."""

from __future__ import annotations

import shutil

import pytest

from tests import _tools


def test_node_without_node_modules_skips_locally_and_fails_in_ci(monkeypatch, tmp_path):
    if not shutil.which("node"):
        pytest.skip("needs node on PATH to show that node alone is not enough")
    monkeypatch.setattr(_tools, "NODE_MODULES", tmp_path / "node_modules")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="ffjavascript not found"):
        _tools.require_node_modules("ffjavascript")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must install it"):
        _tools.require_node_modules("ffjavascript")
    with pytest.raises(pytest.fail.Exception, match="snarkjs not found"):
        _tools.node_bin("snarkjs")


def test_installed_modules_pass(monkeypatch, tmp_path):
    if not shutil.which("node"):
        pytest.skip("needs node on PATH")
    pkg = tmp_path / "node_modules" / "snarkjs"
    pkg.mkdir(parents=True)
    (pkg / "package.json").write_text("{}")
    (tmp_path / "node_modules" / ".bin").mkdir()
    (tmp_path / "node_modules" / ".bin" / "snarkjs").write_text("")
    monkeypatch.setattr(_tools, "NODE_MODULES", tmp_path / "node_modules")
    assert _tools.node_bin("snarkjs") == str(tmp_path / "node_modules" / ".bin" / "snarkjs")


def test_known_missing_path_is_missing_even_if_on_path(monkeypatch):
    """``require_tool(name, "")``: the caller found it missing; PATH must not override that."""
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception):
        _tools.require_tool("sh", "")
