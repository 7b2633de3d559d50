"""Production code never leans on the tests: nothing under cuzk/ or kernels/ imports the tests
package (its doubles and tools) or a test framework, so an installed cuzk, which ships no
tests/, imports whole. The check reads the import statements of every module, lazy imports
inside functions included, so an import that runs only on a rare path is caught too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = ("cuzk", "kernels")
# The tests package, and what only tests install (pyproject's `test` extra).
TEST_ONLY = ("tests", "pytest", "_pytest", "hypothesis", "schemathesis")


def absolute_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of each absolute import in ``source`` (``from a import b`` gives
    ``a.b``). A relative import stays inside its own top-level package: it cannot reach tests/."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def test_production_modules_import_nothing_of_the_tests():
    seen: set[str] = set()
    bad = []
    for top in PRODUCTION:
        for path in sorted((ROOT / top).rglob("*.py")):
            for line, module in absolute_imports(path.read_text()):
                seen.add(module)
                if module.split(".")[0] in TEST_ONLY:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    # The scan sees what it must: the cluster's dry runs build the simulated prover lazily.
    assert "cuzk.simulated_prover.ScriptedProver" in seen
    assert not bad, "production code imports test-only modules:\n" + "\n".join(bad)


def test_the_scan_finds_lazy_and_dotted_imports():
    source = ("import os\n"
              "def f():\n"
              "    from tests._doubles import wait_until\n"
              "    import hypothesis.strategies as st\n")
    assert absolute_imports(source) == [(1, "os"), (3, "tests._doubles.wait_until"),
                                        (4, "hypothesis.strategies")]


# The benches (cuzk/bench) run scenarios and return figures; parsing arguments and the terminal
# belong to the command line (cuzk/cli), which calls them.
NOT_IN_BENCHES = ("argparse", "rich", "cuzk.cli")


def _prints(source: str) -> list[int]:
    """Lines calling the builtin ``print``."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "print"]


def test_the_benches_neither_parse_arguments_nor_print():
    modules = sorted((ROOT / "cuzk" / "bench").glob("*.py"))
    assert {"engine.py", "soak.py", "durability.py", "deadlines.py", "cluster.py",
            "prover.py"} <= {p.name for p in modules}
    bad = []
    for path in modules:
        source = path.read_text()
        for line, module in absolute_imports(source):
            if module == "cuzk.cli" or module.startswith(tuple(f"{m}." for m in NOT_IN_BENCHES)) \
                    or module in NOT_IN_BENCHES:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
        bad += [f"{path.relative_to(ROOT)}:{line} prints" for line in _prints(source)]
    assert not bad, "the benches must return their figures to the CLI:\n" + "\n".join(bad)


def test_the_bench_commands_live_in_the_cli_and_call_the_benches():
    """No scenario left behind in cuzk/cli: each bench command imports its bench."""
    for command, bench in (("bench.py", "cuzk.bench.prover"), ("bench.py", "cuzk.bench.engine"),
                           ("bench_soak.py", "cuzk.bench.soak"),
                           ("bench_durability.py", "cuzk.bench.durability"),
                           ("bench_deadlines.py", "cuzk.bench.deadlines"),
                           ("bench_cluster.py", "cuzk.bench.cluster")):
        source = (ROOT / "cuzk" / "cli" / command).read_text()
        assert any(m.startswith(bench + ".") for _, m in absolute_imports(source)), (command,
                                                                                     bench)
    assert not (ROOT / "cuzk" / "testing.py").exists()


def test_the_print_scan_finds_a_print():
    assert _prints("def f():\n    print('x')\nprint\n") == [2]


def test_every_python_child_starts_through_python_module_command():
    """A child interpreter started by cuzk runs with ``-P`` (cuzk.tools.python_module_command):
    started in a directory that holds a checkout, a bare ``python -m`` imports that ``cuzk/``
    instead of the installed package (the witness compiler did, in the durability bench)."""
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted((ROOT / "cuzk").rglob("*.py")) if path.name != "tools.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "executable"
        and isinstance(node.value, ast.Name) and node.value.id == "sys"
    ]
    assert not offenders, offenders
