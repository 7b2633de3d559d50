"""Fixtures shared across the suite: the pinned snarkjs, and bundled circuits with their keys."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests._tools import node_bin

ROOT = Path(__file__).resolve().parents[1]
KEYS_DIR = Path(os.environ.get("CUZK_TEST_KEYS_DIR", ROOT / ".cache" / "keys"))


@pytest.fixture(autouse=True)
def _private_state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Every test (and every ``cuzk serve`` it starts) gets its own default journal location,
    never the user's ~/.local/state/cuzk/journal.sqlite3 and never another test's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    # Window tables cost seconds of CPU at every key load (a `cuzk serve` started with the
    # default config builds them): off unless a test asks (tests/cuzk/prover/test_msm_tables.py).
    if "CUZK_PROVER_MSM_PRECOMPUTE" not in os.environ:
        monkeypatch.setenv("CUZK_PROVER_MSM_PRECOMPUTE", "off")


@pytest.fixture(scope="session")
def snarkjs():
    """Run the pinned snarkjs CLI: ``snarkjs("groth16", "verify", ...)`` -> stdout."""
    exe_path = node_bin("snarkjs")

    def run(*args: str | Path) -> str:
        proc = subprocess.run(
            [exe_path, *map(str, args)], capture_output=True, text=True, timeout=300
        )
        if proc.returncode != 0:
            raise AssertionError(
                f"snarkjs {' '.join(map(str, args))} failed:\n{proc.stdout}\n{proc.stderr}"
            )
        return proc.stdout

    return run


@dataclass
class BundledSetup:
    kind: str
    zkey_path: Path
    key: Any  # cuzk.prover.ProvingKey
    circuit: Any  # cuzk.prover.Circuit
    inputs: dict


class _BundledCache:
    def __init__(self) -> None:
        self._items: dict[str, BundledSetup] = {}

    def __call__(self, kind: str) -> BundledSetup:
        if kind not in self._items:
            from cuzk.circuits.registry import bundled_circuits
            from cuzk.prover import Circuit, ProvingKey
            from cuzk.prover.keystore import ensure_zkey

            c = bundled_circuits()[kind]
            zkey = ensure_zkey(kind, Path(c.r1cs_path), KEYS_DIR)
            self._items[kind] = BundledSetup(
                kind=kind,
                zkey_path=zkey,
                key=ProvingKey.load(zkey),
                circuit=Circuit.load(c.r1cs_path, c.wasm_path, kind),
                inputs=json.loads(Path(c.sample_input_path).read_text()),
            )
        return self._items[kind]


@pytest.fixture(scope="session")
def bundled() -> _BundledCache:
    """``bundled("porep-c2")`` -> circuit, cached dev proving key and sample input."""
    return _BundledCache()


SCRIPTED_KINDS = {"porep-c2": (3, "normal"), "winning-post": (1, "critical")}


@pytest.fixture
def scripted():
    """A started engine over the scripted prover (tiny budget, one synthesis and one finalizer
    thread, two GPU workers): ``(engine, prover, span_exporter)``."""
    from tests._doubles import make_test_engine

    engine, prover, spans = make_test_engine(
        SCRIPTED_KINDS,
        backend="cpu",
        synthesis_threads=1,
        finalizer_threads=1,
        memory_budget_bytes=1 << 20,
    )
    engine.start()
    yield engine, prover, spans
    engine.shutdown(timeout=5)


@pytest.fixture
def engine(scripted):
    """The scripted engine of ``scripted``."""
    return scripted[0]


@pytest.fixture
def prover(scripted):
    """The ScriptedProver driving ``engine``: hold, delay or fail its steps."""
    return scripted[1]


@pytest.fixture
def spans(scripted):
    """The in-memory span exporter of ``engine``."""
    return scripted[2]
