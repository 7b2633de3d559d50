"""Reproducible installs: every third-party package cuzk/ and kernels/ import is declared in
pyproject.toml, what cuzk subclasses is bounded above, and constraints.txt pins every declared
package at a version its requirement allows."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
FIRST_PARTY = {"cuzk", "kernels"}
# Modules of the GPU extra that a CPU-only test machine does not have installed (no metadata to
# look them up in): the distribution that provides each.
NOT_INSTALLED = {"cupy": "cupy-cuda13x", "pynvml": "nvidia-ml-py"}
# Packages whose internals cuzk subclasses or drives (cuzk/api/server.py): bounded above.
INTERNALS = {"uvicorn", "h11", "wasmtime"}


def _requirements() -> dict[str, tuple[str, Requirement]]:
    """canonical name -> (where declared, requirement), runtime and every extra."""
    out = {}
    for where, reqs in [("dependencies", PYPROJECT["dependencies"]),
                        *PYPROJECT["optional-dependencies"].items()]:
        for text in reqs:
            req = Requirement(text)
            if canonicalize_name(req.name) != "cuzk":
                out[canonicalize_name(req.name)] = (where, req)
    return out


def _imports() -> dict[str, set[str]]:
    """Every imported module outside the standard library and cuzk -> the files importing it."""
    found: dict[str, set[str]] = {}
    for root in FIRST_PARTY:
        for path in (ROOT / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    # ``from opentelemetry import trace`` may import a module: look it up first.
                    names = [f"{node.module}.{a.name}" for a in node.names]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
                        found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def _owners() -> dict[str, set[str]]:
    """Installed module path prefix ("opentelemetry/sdk") -> the distributions with files there."""
    owners: dict[str, set[str]] = {}
    for dist in distributions():
        name = canonicalize_name(dist.metadata["Name"])
        for f in dist.files or ():
            parts = Path(str(f)).with_suffix("").parts
            if not parts or parts[0].endswith((".dist-info", ".data")) or parts[0] == "..":
                continue
            for k in range(1, len(parts) + 1):
                owners.setdefault("/".join(parts[:k]), set()).add(name)
    return owners


def _distribution(module: str, owners: dict[str, set[str]]) -> str | None:
    """The one distribution that provides ``module`` (deepest path that a single one owns)."""
    parts = module.split(".")
    if parts[0] in NOT_INSTALLED:
        return NOT_INSTALLED[parts[0]]
    for k in range(len(parts), 0, -1):
        dists = owners.get("/".join(parts[:k]))
        if dists and len(dists) == 1:
            return next(iter(dists))
    return None


def test_every_third_party_import_is_declared():
    declared = _requirements()
    owners = _owners()
    imports = _imports()
    assert {"numpy", "uvicorn", "h11", "opentelemetry.sdk.trace.TracerProvider"} <= {
        m.split(".")[0] for m in imports} | set(imports), "the scan missed known imports"
    missing = []
    for module, files in sorted(imports.items()):
        dist = _distribution(module, owners)
        if dist is None or dist not in declared:
            missing.append(f"{module} ({dist or 'no distribution found'}) in {sorted(files)[0]}")
    assert not missing, "imported but not declared in pyproject.toml:\n" + "\n".join(missing)


def test_what_cuzk_subclasses_is_bounded_above():
    declared = _requirements()
    for name in INTERNALS:
        _, req = declared[name]
        assert any(s.operator in ("<", "<=", "~=", "==") for s in req.specifier), (
            f"{req}: cuzk relies on its internals, so a new release must not arrive unseen")


def test_constraints_pin_every_declared_package_within_its_requirement():
    text = (ROOT / "constraints.txt").read_text()
    pins = {canonicalize_name(m[1]): Version(m[2])
            for m in re.finditer(r"^([A-Za-z0-9][\w.-]*)==(\S+)$", text, flags=re.M)}
    assert len(pins) > 20
    # The GPU extra needs a CUDA host to install; everything else is pinned.
    unpinned = sorted(n for n, (where, _) in _requirements().items()
                      if n not in pins and where != "gpu")
    assert not unpinned, f"declared but not pinned in constraints.txt: {unpinned}"
    outside = [f"{req} but {pins[n]} pinned" for n, (_, req) in _requirements().items()
               if n in pins and not req.specifier.contains(pins[n], prereleases=True)]
    assert not outside, outside


def test_every_install_uses_the_constraints():
    makefile = (ROOT / "Makefile").read_text()
    installs = re.findall(r"pip install (?!--quiet --upgrade pip).*", makefile)
    assert installs and all("-c constraints.txt" in line for line in installs), installs
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^RUN pip install -c constraints.txt ", dockerfile, flags=re.M)
    assert re.search(r"^COPY .*constraints.txt", dockerfile, flags=re.M)
