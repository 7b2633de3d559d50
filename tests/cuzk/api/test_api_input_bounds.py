"""A submit's cost is bounded before it is parsed: by what the proof kinds' circuits can take
(413 while reading), and by the engine's host memory budget (503 when parsing would not fit)
(issue 19: a 2 MB body with a 10^6-element array took 13-43 s of CPU before its 422)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.api.input_bounds import kind_body_limit, parse_reservation
from cuzk.api.routes import jobs as jobs_routes
from cuzk.circuits.registry import bundled_circuits
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, default_proof_kinds
from cuzk.prover.real_prover import RealProver
from tests.conftest import KEYS_DIR

SMALL, LARGE = "winning-post", "porep-c2"


def post(client: TestClient, body: bytes) -> Any:
    return client.post("/v1/proofs", content=body, headers={"content-type": "application/json"})


@pytest.fixture(scope="module")
def real() -> Iterator[tuple[TestClient, Engine]]:
    kinds = default_proof_kinds()
    settings = EngineSettings(
        backend="cpu", synthesis_threads=1, finalizer_threads=1, memory_budget_bytes=1 << 30,
        keys_dir=KEYS_DIR, proof_kinds={k: kinds[k] for k in (SMALL, LARGE)},
    )
    engine = Engine(settings, RealProver(settings)).start()
    with TestClient(create_app(engine)) as client:
        yield client, engine
    engine.shutdown(timeout=10)


@pytest.mark.parametrize("kind", sorted(default_proof_kinds()))
def test_every_bundled_sample_input_fits_its_kinds_bound_even_indented(kind: str) -> None:
    settings = default_proof_kinds()[kind]
    elements = RealProver(EngineSettings(backend="cpu", proof_kinds=default_proof_kinds()))
    sample = json.loads(bundled_circuits()[kind].sample_input_path.read_text())
    body = json.dumps({"proof_kind": kind, "inputs": [sample] * settings.partitions,
                       "request_id": "r" * 256, "priority": "normal"}, indent=8)
    bound = kind_body_limit(settings.partitions, elements.input_elements(kind))
    assert len(body.encode()) < bound / 2, (len(body), bound)


def test_a_huge_array_is_refused_while_it_is_read_never_parsed(real, monkeypatch) -> None:
    client, engine = real
    before = engine.status()["counters"]

    def must_not_parse(raw: bytes) -> Any:
        raise AssertionError(f"a body of {len(raw)} bytes was parsed")

    monkeypatch.setattr(jobs_routes, "parse_json", must_not_parse)
    body = json.dumps({"proof_kind": SMALL, "inputs": [{"leaf": [1] * 10**6}]}).encode()
    assert len(body) > 2_000_000
    r = post(client, body)
    assert r.status_code == 413, r.text
    assert "the most any configured proof kind's inputs can take" in r.json()["error"]
    assert engine.status()["counters"] == before


def test_a_body_larger_than_its_kind_can_need_is_413_naming_the_kind(real) -> None:
    """Under the largest kind's bound, over the small kind's: refused once the kind is known."""
    client, _ = real
    body = json.dumps({"proof_kind": SMALL, "inputs": [{"leaf": ["1" * 70] * 1500}]}).encode()
    assert kind_body_limit(1, 10) < len(body) < kind_body_limit(10, 56)
    r = post(client, body)
    assert r.status_code == 413, r.text
    assert f"proof kind {SMALL!r} can need" in r.json()["error"]


def test_parsing_is_refused_when_the_memory_budget_has_no_room(engine: Engine) -> None:
    """Parsing memory is reserved from the host budget first: none free, 503 and nothing
    changes; free again, the same request is taken."""
    body = json.dumps({"proof_kind": SMALL, "inputs": [{"tag": "1"}]}).encode()
    budget = engine.host_budget
    hog = budget.try_reserve(budget.total - budget.reserved - parse_reservation(len(body)) + 1,
                             "test")
    assert hog is not None
    with TestClient(create_app(engine)) as client:
        before = engine.status()["counters"]
        r = post(client, body)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "1"
        assert "engine.memory_budget_bytes" in r.json()["error"]
        assert engine.status()["counters"] == before
        hog.close()
        r = post(client, body)
        assert r.status_code == 202, r.text
    assert "request_inputs" not in budget.reserved_by_consumer()  # released after the submit
