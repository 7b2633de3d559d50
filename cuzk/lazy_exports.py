"""Package re-exports resolved on first use (PEP 562).

A package ``__init__`` that imports every submodule makes ``import cuzk.prover.keys`` (or
``cuzk.engine.settings``) pay for all of them: the numba kernels, the wasm runtime, the
scheduler. One-proof processes such as ``cuzk prove`` start in a fraction of the time when a
name's module is imported only when the name is first read.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``package.<exports[name]>`` the
    first time ``name`` is read and caches the value in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
