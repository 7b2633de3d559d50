"""A 202 means the job can run: the submit-time memory check charges the key what the budget
will charge it once loaded, whether or not the key exists yet (issue 19)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.circuits.registry import bundled_circuits
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, default_proof_kinds
from cuzk.prover.keystore import ensure_zkey
from cuzk.prover.real_prover import WITNESS_CACHE, WITNESS_RUNTIME_BYTES, RealProver
from tests.conftest import KEYS_DIR

KIND = "porep-c2"
BODY = {"proof_kind": KIND, "inputs": [{}] * 10}


@contextmanager
def _client(budget: int, keys_dir: Path) -> Iterator[TestClient]:
    settings = EngineSettings(backend="cpu", memory_budget_bytes=budget, keys_dir=keys_dir,
                              proof_kinds=default_proof_kinds(), synthesis_threads=1,
                              finalizer_threads=1)
    engine = Engine(settings, RealProver(settings)).start()
    try:
        with TestClient(create_app(engine)) as client:
            yield client
    finally:
        engine.shutdown(timeout=10)


def test_the_readme_budget_refuses_porep_c2_before_its_key_exists(tmp_path: Path):
    with _client(30_000_000, tmp_path) as client:
        r = client.post("/v1/proofs", json=BODY)
    assert r.status_code == 507, r.text
    assert KIND in r.json()["error"]
    # Refused without generating the key (its generator is compiled: its figures are the
    # partition's).
    assert [p.name for p in tmp_path.iterdir()] == [WITNESS_CACHE]


@pytest.fixture(scope="module")
def need() -> int:
    """What one porep-c2 partition needs with its key resident, measured by loading it."""
    ensure_zkey(KIND, Path(bundled_circuits()[KIND].r1cs_path), KEYS_DIR)
    prover = RealProver(EngineSettings(backend="cpu", proof_kinds=default_proof_kinds(),
                                       keys_dir=KEYS_DIR))
    handle = prover.load_key(KIND)
    return int(handle.host_bytes) + int(handle.estimate.partition_bytes) + int(
        prover.runtime_host_bytes())  # held from the start, for the process's life


def test_a_budget_one_byte_short_of_the_loaded_key_is_507_at_submit(need: int):
    """The zkey file is smaller than the loaded key: a check on the file's size let budgets
    between the two through, and the job failed once the key was loaded."""
    with _client(need - 1, KEYS_DIR) as client:
        r = client.post("/v1/proofs", json=BODY)
    assert r.status_code == 507, r.text
    error = r.json()["error"].replace(",", "")
    runtime = WITNESS_RUNTIME_BYTES
    assert str(need - runtime) in error and f"{runtime} of them held" in error, error


def test_a_budget_of_exactly_the_need_is_accepted(need: int):
    with _client(need, KEYS_DIR) as client:
        r = client.post("/v1/proofs", json=BODY)
        assert r.status_code != 507, r.text
