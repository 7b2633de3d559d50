"""The API over the real prover with a custom proof kind (the snarkjs-made tiny circuit): its
verification key served, its sample input served, a broken key answered with 500 JSON naming
the file and the section (a server fault, never a 422 blaming the client)."""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.config import Config, ProofKindConfig
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.prover.keys import ProvingKey
from cuzk.prover.real_prover import RealProver
from cuzk.prover.verify import VerificationKey, verify
from tests.cuzk.prover.test_prover_keycheck import R1CS, WASM, ZKEY, corrupt

INPUT = R1CS.parent / "tiny.input.json"


def _app(tmp_path: Path, zkey: Path, sample: Path | None = INPUT):
    settings = EngineSettings(
        backend="cpu",
        synthesis_threads=1,
        finalizer_threads=1,
        memory_budget_bytes=1 << 30,
        keys_dir=tmp_path / "keys",
        proof_kinds={"tiny": ProofKindSettings("tiny", 2, r1cs=R1CS, wasm=WASM, zkey=zkey)},
    )
    config = Config(
        proof_kinds={
            "tiny": ProofKindConfig(
                name="tiny", r1cs=R1CS, wasm=WASM, zkey=zkey, sample_input=sample, partitions=2
            )
        }
    )
    engine = Engine(settings, RealProver(settings)).start()
    return engine, create_app(engine, config)


@pytest.fixture
def good(tmp_path: Path) -> Iterator[TestClient]:
    engine, app = _app(tmp_path, ZKEY)
    with TestClient(app) as client:
        yield client
    engine.shutdown(timeout=10)


def test_verification_key_is_the_served_keys(good: TestClient):
    r = good.get("/v1/circuits/tiny/verification_key")
    assert r.status_code == 200, r.text
    vk = r.json()
    assert vk == ProvingKey.load(ZKEY).verification_key.to_json()
    assert list(vk)[:8] == [
        "protocol", "curve", "nPublic", "vk_alpha_1", "vk_beta_2", "vk_gamma_2", "vk_delta_2",
        "vk_alphabeta_12",
    ]  # fmt: skip
    # ... and proofs the server makes verify against it.
    sample = good.get("/v1/circuits/tiny/sample_input").json()
    assert sample == json.loads(INPUT.read_text())
    job = good.post("/v1/proofs", json={"proof_kind": "tiny", "inputs": [sample, sample]}).json()
    job = good.get(f"/v1/proofs/{job['id']}", params={"wait": 60}).json()
    assert job["state"] == "succeeded", job
    parsed = VerificationKey.from_json(vk)
    assert all(verify(parsed, p["proof"], p["public"]) for p in job["proofs"])


def test_unknown_kind_is_404(good: TestClient):
    for route in ("verification_key", "sample_input"):
        r = good.get(f"/v1/circuits/nope/{route}")
        assert r.status_code == 404 and "unknown proof kind 'nope'" in r.json()["error"]


def test_no_sample_input_is_404_saying_so(tmp_path: Path):
    engine, app = _app(tmp_path, ZKEY, sample=None)
    try:
        with TestClient(app) as client:
            r = client.get("/v1/circuits/tiny/sample_input")
        assert r.status_code == 404 and "has no sample input" in r.json()["error"]
    finally:
        engine.shutdown(timeout=10)


@pytest.mark.parametrize("section", [3, 7])
def test_broken_key_is_500_naming_file_and_section(tmp_path: Path, section: int):
    bad = corrupt(ZKEY, tmp_path / "bad.zkey", section)
    engine, app = _app(tmp_path, bad)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            r = client.post("/v1/keys/tiny/preload")
            assert r.status_code == 500, r.text
            body = r.json()
            assert (body["file"], body["section"]) == (str(bad), section)
            assert f"{bad}: section {section} (" in body["error"]
            assert "the key is corrupt" in body["error"]
            # A job on it fails with the same reason (not a witness complaint).
            sample = json.loads(INPUT.read_text())
            r = client.post("/v1/proofs", json={"proof_kind": "tiny", "inputs": [sample] * 2})
            assert r.status_code == 202
            job = client.get(f"/v1/proofs/{r.json()['id']}", params={"wait": 60}).json()
            assert job["state"] == "failed"
            assert f"section {section} (" in job["error"] and "witness" not in job["error"]
            if section == 3:  # the vk lives in sections 2 and 3
                r = client.get("/v1/circuits/tiny/verification_key")
                assert r.status_code == 500 and "section 3 (IC)" in r.json()["error"]
    finally:
        engine.shutdown(timeout=10)


def test_key_of_another_circuit_is_500(tmp_path: Path, bundled):
    other = tmp_path / "other.zkey"
    shutil.copy(bundled("winning-post").zkey_path, other)
    engine, app = _app(tmp_path, other)
    try:
        with TestClient(app) as client:
            r = client.post("/v1/keys/tiny/preload")
        assert r.status_code == 500
        assert r.json()["file"] == str(other)
        assert "is not a key for circuit tiny" in r.json()["error"]
    finally:
        engine.shutdown(timeout=10)
