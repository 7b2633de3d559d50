"""kernels sit below cuzk: they carry their own curve parameters and import nothing from cuzk,
so they can be built, tested and reused without the engine, the API or the file formats."""

from __future__ import annotations

import ast
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_kernels_import_nothing_from_cuzk():
    files = sorted(KERNELS.rglob("*.py"))
    assert len(files) > 5, "the scan found no kernel modules"
    upward = [f"{p.relative_to(KERNELS)}: {name}" for p in files for name in _imports(p)
              if name == "cuzk" or name.startswith("cuzk.")]
    assert not upward, upward


def test_cuzk_curves_are_the_kernels_curves():
    """One set of parameters: cuzk re-exports the kernels' objects, it does not copy them."""
    import cuzk.curves
    import kernels.curves

    assert cuzk.curves.BLS12_381 is kernels.curves.BLS12_381
    assert cuzk.curves.CURVES[kernels.curves.BLS12_381.name] is kernels.curves.BLS12_381
