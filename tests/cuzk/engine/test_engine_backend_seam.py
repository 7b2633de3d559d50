"""The engine's one seam to a prover: every capability it uses is declared in ProverBackend,
both provers implement all of it, and an engine is built over an injected prover without
loading the real one (numba, wasmtime, cuzk.prover)."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from cuzk.engine.backend import ProverBackend
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings
from cuzk.simulated_prover import ScriptedProver

ENGINE_DIR = Path(__file__).resolve().parents[3] / "cuzk" / "engine"
MEMBERS = {n for n in dir(ProverBackend) if not n.startswith("_")} | {"name", "devices"}


def _prover_uses() -> tuple[set[str], list[str]]:
    """Attributes read off a prover anywhere in cuzk/engine, and every getattr on one."""
    used: set[str] = set()
    lookups: list[str] = []
    for path in ENGINE_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name,
                                                                           ast.Attribute)):
                owner = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
                if owner in ("prover", "_prover"):
                    used.add(node.attr)
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and node.args
                    and "prover" in ast.unparse(node.args[0])):
                lookups.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return used, lookups


def test_every_prover_capability_the_engine_uses_is_declared():
    used, lookups = _prover_uses()
    assert not lookups, "the engine looks prover methods up by name instead of declaring them"
    assert used, "the scan found no prover calls at all: it is looking in the wrong place"
    assert used <= MEMBERS, f"undeclared in ProverBackend: {sorted(used - MEMBERS)}"


def _methods(cls: type) -> dict[str, inspect.Signature]:
    return {n: inspect.signature(getattr(cls, n)) for n in MEMBERS
            if callable(getattr(cls, n, None))}


@pytest.mark.parametrize("which", ["scripted", "real"])
def test_both_provers_implement_the_whole_protocol(which: str):
    if which == "scripted":
        cls: type = ScriptedProver
    else:
        from cuzk.prover.real_prover import RealProver

        cls = RealProver
    declared = _methods(ProverBackend)
    missing = sorted(set(declared) - set(dir(cls)))
    assert not missing, f"{cls.__name__} lacks {missing}"
    for name, sig in declared.items():
        got = inspect.signature(getattr(cls, name))
        assert list(got.parameters) == list(sig.parameters), (name, str(got), str(sig))


def test_an_engine_needs_its_prover_injected():
    with pytest.raises(TypeError):
        cast(Any, Engine)(EngineSettings())


def test_an_engine_over_the_scripted_prover_loads_no_real_prover():
    """In a fresh interpreter: build an engine, then see what got imported."""
    code = (
        "import sys\n"
        "from cuzk.engine import Engine\n"
        "from cuzk.engine.settings import EngineSettings\n"
        "from cuzk.simulated_prover import ScriptedProver\n"
        "Engine(EngineSettings(), ScriptedProver())\n"
        "heavy = ('numba', 'wasmtime', 'cuzk.prover', 'kernels', 'cupy')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
