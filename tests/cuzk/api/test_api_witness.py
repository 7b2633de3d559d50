"""``POST /v1/proofs/witness``: a job proven from ready .wtns files, one per partition.

A real engine (CPU prover, the bundled winning-post circuit configured with two partitions)
with a journal: a good body proves and verifies; every bad body is one clear 4xx and leaves
nothing behind (no job, no journal row, no file in the witness directory)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.api.input_bounds import witness_body_limit
from cuzk.curves import BN128_SCALAR_PRIME
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.formats.wtns import write_wtns
from cuzk.protocol import WITNESS_MEDIA_TYPE, WITNESS_SUBMIT_PATH
from cuzk.prover.real_prover import RealProver
from cuzk.prover.verify import verify
from tests.cuzk.api._openapi_check import OpenApiChecker
from tests.cuzk.api.conftest import CheckedClient

KIND = "winning-post"
PARTITIONS = 2
OCTETS = {"content-type": WITNESS_MEDIA_TYPE}


def wtns_bytes(tmp: Path, values: np.ndarray, curve) -> bytes:  # type: ignore[no-untyped-def]
    path = tmp / "w.wtns"
    write_wtns(path, values, curve)
    return path.read_bytes()


@pytest.fixture(scope="module")
def real(bundled, tmp_path_factory) -> Iterator[tuple[TestClient, Engine, object, bytes]]:
    b = bundled(KIND)
    state = tmp_path_factory.mktemp("witness-api")
    settings = EngineSettings(
        backend="cpu", synthesis_threads=1, finalizer_threads=1, memory_budget_bytes=1 << 30,
        journal_path=state / "journal.sqlite3",
        proof_kinds={KIND: ProofKindSettings(KIND, PARTITIONS, "critical", zkey=b.zkey_path)},
    )
    engine = Engine(settings, RealProver(settings)).start()
    witness = b.circuit.calculate_witness(b.inputs)
    good = wtns_bytes(state, witness, b.key.curve)
    app = create_app(engine)
    with CheckedClient(app) as client:
        client.checker = OpenApiChecker(client.get("/openapi.json").json(), app.routes)
        yield client, engine, b, good
    engine.shutdown(timeout=10)


def post(client: TestClient, body: bytes, **query: str):  # type: ignore[no-untyped-def]
    return client.post(WITNESS_SUBMIT_PATH, params={"proof_kind": KIND, **query},
                       content=body, headers=OCTETS)


def leftovers(engine: Engine) -> list[str]:
    return sorted(p.name for p in engine.witnesses.directory.glob("*"))


def test_witnesses_prove_and_verify_and_leave_nothing_on_disk(real):
    client, engine, b, good = real
    r = post(client, good + good, request_id="wtns-good")
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    assert r.headers["location"] == f"/v1/proofs/{job_id}"
    job = client.get(f"/v1/proofs/{job_id}", params={"wait": 120}).json()
    assert job["state"] == "succeeded", job
    assert len(job["proofs"]) == PARTITIONS
    for entry in job["proofs"]:
        assert verify(b.key.verification_key, entry["proof"], entry["public"])
    assert engine.get(job_id).settled.wait(10)  # its file goes once every partition settled
    assert leftovers(engine) == []  # removed once the job settled
    # A replay of the same request id and bytes is the same job; other bytes are a 409.
    assert post(client, good + good, request_id="wtns-good").json()["id"] == job_id
    r = post(client, good + wtns_bytes_changed(good), request_id="wtns-good")
    assert r.status_code == 409, r.text
    assert "inputs" in r.json()["error"]


def wtns_bytes_changed(good: bytes) -> bytes:
    """A witness of the same shape with its last value changed (still below the prime)."""
    out = bytearray(good)
    out[-32] ^= 1
    return bytes(out)


def test_a_witness_failing_its_constraints_fails_the_job_naming_the_partition(real):
    client, engine, _, good = real
    r = post(client, good + wtns_bytes_changed(good))
    assert r.status_code == 202, r.text
    job = client.get(f"/v1/proofs/{r.json()['id']}", params={"wait": 120}).json()
    assert job["state"] == "failed", job
    assert job["error"].startswith("partition 1: the submitted witness"), job["error"]
    assert "does not satisfy constraint" in job["error"]
    assert engine.get(job["id"]).settled.wait(10)
    assert leftovers(engine) == []


def _bn128(good: bytes) -> bytes:
    out = bytearray(good)
    out[28:60] = BN128_SCALAR_PRIME.to_bytes(32, "little")  # the header's prime
    return bytes(out)


def _wire0(good: bytes) -> bytes:
    out = bytearray(good)
    out[76] = 2  # wire 0's low byte: values follow the file's 76 header bytes
    return bytes(out)


BAD_BODIES = {
    "wrong-field": (lambda g: _bn128(g) + g, 400, "witness 0 (partition 0): is a bn128 witness"),
    "wrong-count": (lambda g: g, 400, "takes 2 witnesses (one .wtns per partition, back to "
                                      "back), the body holds 1"),
    "truncated": (lambda g: g + g[:-100], 400, "witness 1 (at byte"),
    "not-wtns": (lambda g: b"x" * 40, 400, "not a wtns file"),
    "empty": (lambda g: b"", 400, "request body is empty"),
    "wire-0": (lambda g: g + _wire0(g), 400, "witness 1 (partition 1): wire 0 is not 1"),
}


@pytest.mark.parametrize("name", sorted(BAD_BODIES))
def test_bad_witness_bodies_are_refused_and_nothing_is_admitted(real, name):
    client, engine, _, good = real
    make, status, message = BAD_BODIES[name]
    before = engine.status()["counters"]["jobs_submitted"]
    journaled = engine.journal.counts()
    r = post(client, make(good))
    assert r.status_code == status, r.text
    assert message in r.json()["error"], r.json()
    assert engine.status()["counters"]["jobs_submitted"] == before
    assert engine.journal.counts() == journaled
    assert leftovers(engine) == []


def test_a_witness_of_another_size_names_both_counts(real):
    client, engine, b, good = real
    short = wtns_bytes(engine.witnesses.directory.parent, b.circuit.calculate_witness(
        b.inputs)[:-1], b.key.curve)
    r = post(client, good + short)
    assert r.status_code == 400, r.text
    n = b.key.sizes.n_vars
    assert r.json()["error"] == (
        f"witness 1 (partition 1): has {n - 1} variables, proof kind {KIND!r}'s circuit has"
        f" {n} (a witness of another circuit?)")
    assert leftovers(engine) == []


def test_a_body_over_the_kinds_bound_is_413_naming_it(real):
    client, engine, b, good = real
    bound = witness_body_limit(PARTITIONS, b.key.sizes.n_vars, 32)
    assert bound == 2 * len(good)  # the bound is exactly the kind's witnesses
    before = engine.journal.counts()
    r = post(client, good + good + b"\0")
    assert r.status_code == 413, r.text
    assert f"({bound} bytes: 2 .wtns files of {b.key.sizes.n_vars} variables)" in \
        r.json()["error"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: refused while it streams
        yield good
        yield good
        yield b"\0" * 4096

    r = client.post(WITNESS_SUBMIT_PATH, params={"proof_kind": KIND}, content=chunks(),
                    headers=OCTETS)
    assert r.status_code == 413, r.text
    assert r.json()["error"].startswith("request body is larger than proof kind")
    assert engine.journal.counts() == before
    assert leftovers(engine) == []


def test_query_content_type_and_kind_are_checked_first(real):
    client, engine, _, good = real
    r = client.post(WITNESS_SUBMIT_PATH, params={"proof_kind": KIND}, content=good + good,
                    headers={"content-type": "application/json"})
    assert r.status_code == 415, r.text
    assert "application/octet-stream" in r.json()["error"]
    r = client.post(WITNESS_SUBMIT_PATH, params={"proof_kind": "nope"}, content=good,
                    headers=OCTETS)
    assert r.status_code == 404, r.text
    r = client.post(WITNESS_SUBMIT_PATH, params={"kind": KIND}, content=good, headers=OCTETS)
    assert r.status_code == 400, r.text
    assert "unknown field: 'kind'" in r.json()["error"]
    r = post(client, good + good, priority="urgent")
    assert r.status_code == 400, r.text
    assert "'priority' must be one of critical, high, normal, low" in r.json()["error"]
    assert leftovers(engine) == []


def test_a_server_whose_prover_takes_no_witness_says_so(engine):
    """The scripted prover (like a cluster head) has no circuit to check a witness with."""
    with TestClient(create_app(engine)) as client:
        r = client.post(WITNESS_SUBMIT_PATH, params={"proof_kind": "winning-post"},
                        content=b"wtns", headers=OCTETS)
    assert r.status_code == 501, r.text
    assert "does not take witnesses" in r.json()["error"]


def test_a_parse_reserve_too_small_to_check_a_witness_is_413_naming_the_setting(
    real, monkeypatch
):
    """Checking a witness holds WITNESS_CHECK_BYTES whatever its size; a reserve configured
    below that can never check one: 413 naming the setting, not a wait."""
    from cuzk.api.input_bounds import WITNESS_CHECK_BYTES
    from cuzk.engine.memory import MemoryBudget

    client, engine, _, good = real
    monkeypatch.setattr(engine, "parse_budget",
                        MemoryBudget(WITNESS_CHECK_BYTES - 1, "request_parse"))
    r = post(client, good + good)
    assert r.status_code == 413, r.text
    assert f"needs {WITNESS_CHECK_BYTES} bytes" in r.json()["error"]
    assert "engine.request_parse_reserve_bytes" in r.json()["error"]
    assert leftovers(engine) == []
