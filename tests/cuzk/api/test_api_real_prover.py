"""The API over the real prover: a proof that verifies; witness failures refused at submit."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator

import pytest
from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.prover.real_prover import RealProver
from cuzk.prover.verify import verify

KIND = "winning-post"


@pytest.fixture(scope="module")
def real(bundled) -> Iterator[tuple[TestClient, Engine, dict]]:
    b = bundled(KIND)  # makes (or reuses) the cached development key
    settings = EngineSettings(
        backend="cpu",
        synthesis_threads=1,
        finalizer_threads=1,
        memory_budget_bytes=1 << 30,
        proof_kinds={KIND: ProofKindSettings(KIND, 1, "critical", zkey=b.zkey_path)},
    )
    engine = Engine(settings, RealProver(settings)).start()
    with TestClient(create_app(engine)) as client:
        yield client, engine, b
    engine.shutdown(timeout=10)


def test_real_proof_through_the_api_verifies(real):
    client, _, b = real
    inputs = b.inputs
    r = client.post("/v1/proofs", json={"proof_kind": KIND, "inputs": [inputs]})
    assert r.status_code == 202, r.text
    job = client.get(f"/v1/proofs/{r.json()['id']}", params={"wait": 60}).json()
    assert job["state"] == "succeeded", job
    (proof,) = job["proofs"]
    assert verify(b.key.verification_key, proof["proof"], proof["public"])


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda i: i.pop("root"), "root"),
        (lambda i: i.update(unknown_signal=1), "unknown_signal"),
        (lambda i: i.update(root=[1]), "root"),
    ],
    ids=["missing-signal", "extra-signal", "wrong-length"],
)
def test_inputs_failing_witness_generation_are_422_at_submit(real, mutate, expected):
    client, engine, b = real
    before = engine.status()["counters"]
    inputs = copy.deepcopy(b.inputs)
    mutate(inputs)
    r = client.post("/v1/proofs", json={"proof_kind": KIND, "inputs": [inputs]})
    assert r.status_code == 422, r.text
    assert expected in r.json()["error"]
    assert engine.status()["counters"] == before  # nothing was submitted


def test_inputs_that_break_a_circuit_assert_are_422(real):
    client, _, b = real
    inputs = copy.deepcopy(b.inputs)
    inputs["leaf"] = [[str(int(str(inputs["leaf"][0][0])) + 1)]]
    r = client.post("/v1/proofs", json={"proof_kind": KIND, "inputs": [inputs]})
    assert r.status_code == 422, r.text
    assert "root mismatch" in r.json()["error"]
