"""The type checker is part of `make test`: mypy runs after ruff and before pytest, over every
module of cuzk/ and kernels/, strict on the engine core, the wire protocol, the prover and the
cluster."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
STRICT = {"disallow_untyped_defs", "disallow_incomplete_defs", "disallow_any_generics",
          "warn_return_any", "no_implicit_reexport", "disallow_untyped_calls"}


def test_make_test_runs_mypy_between_ruff_and_pytest():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert recipe, "no test target"
    steps = [line.strip().split()[0].rsplit("/", 1)[-1] for line in recipe.group(1).splitlines()]
    assert steps == ["ruff", "mypy", "pytest"], steps
    assert any(r.startswith("mypy") for r in PYPROJECT["project"]["optional-dependencies"]["test"])


def test_mypy_checks_everything_and_is_strict_on_the_core():
    mypy = PYPROJECT["tool"]["mypy"]
    assert set(mypy["files"]) == {"cuzk", "kernels"}
    strict = [o for o in mypy["overrides"] if {k for k, v in o.items() if v is True} >= STRICT]
    modules = {m for o in strict for m in o["module"]}
    assert {"cuzk.engine", "cuzk.engine.*", "cuzk.protocol", "cuzk.prover", "cuzk.prover.*",
            "cuzk.cluster", "cuzk.cluster.*"} <= modules, modules
