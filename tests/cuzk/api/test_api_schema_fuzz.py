"""Schemathesis against the live server's own /openapi.json: every generated request (valid and
invalid, deterministic seed, bounded examples) gets no 5xx and a response the schema documents
(status code, content type, headers, body). Most runs use the scripted engine so they are quick;
the routes, middleware and server protocol are the real ones. The submit route is fuzzed over the
real prover too (witness generation from client-chosen signal names and values), with fewer
examples so the run stays bounded."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from cuzk.api.app import create_app
from cuzk.api.server import uvicorn_config
from cuzk.config import Config, ServerConfig
from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.prover.real_prover import RealProver
from cuzk.serve_process import uvicorn_in_thread

TOKEN = "schema-fuzz-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
REAL_KIND = "winning-post"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


@pytest.fixture
def live_url(engine: Engine) -> Iterator[str]:
    config = Config(
        server=ServerConfig(listen="127.0.0.1:0", auth_token=TOKEN, max_body_bytes=65536)
    )
    with uvicorn_in_thread(
        uvicorn_config(create_app(engine, config), config, log_level="error")
    ) as url:
        yield url


@pytest.fixture(scope="module")
def real_live_url(bundled) -> Iterator[str]:
    """The server over the real prover (the winning-post development key)."""
    b = bundled(REAL_KIND)
    settings = EngineSettings(
        backend="cpu",
        synthesis_threads=1,
        finalizer_threads=1,
        memory_budget_bytes=1 << 30,
        proof_kinds={REAL_KIND: ProofKindSettings(REAL_KIND, 1, "critical", zkey=b.zkey_path)},
    )
    engine = Engine(settings, RealProver(settings)).start()
    config = Config(
        server=ServerConfig(listen="127.0.0.1:0", auth_token=TOKEN, max_body_bytes=65536)
    )
    try:
        with uvicorn_in_thread(
            uvicorn_config(create_app(engine, config), config, log_level="error")
        ) as url:
            yield url
    finally:
        engine.shutdown(timeout=10)


def run_operations(url: str, mode: GenerationMode, examples: int, headers: dict[str, str],
                   checks: list, only: str | None = None,  # type: ignore[type-arg]
                   prepare: Callable[[Any], None] | None = None,
                   statuses: list[int] | None = None) -> list[str]:  # fmt: skip
    """Every operation of the served schema (or ``only`` the one with that label),
    ``examples`` generated cases each (derandomized), each first given to ``prepare``; the
    status of each response is appended to ``statuses``. Returns the operations exercised."""
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", headers=AUTH)
    exercised = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if only is not None and operation.label != only:
            continue

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=examples,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case) -> None:  # type: ignore[no-untyped-def]
            if prepare is not None:
                prepare(case)
            response = case.call_and_validate(headers=headers, checks=checks, timeout=30)
            if statuses is not None:
                statuses.append(response.status_code)

        try:
            exercise()
        except Unsatisfiable:
            # Negative mode on an operation with no parameters and no body: nothing to break.
            assert mode is GenerationMode.NEGATIVE, operation.label
            continue
        exercised.append(operation.label)
    return exercised


def test_valid_requests_get_documented_responses_and_no_5xx(live_url: str) -> None:
    exercised = run_operations(live_url, GenerationMode.POSITIVE, 25, AUTH, CHECKS)
    assert len(exercised) >= 13, exercised


def test_invalid_requests_are_4xx_and_documented(live_url: str) -> None:
    exercised = run_operations(live_url, GenerationMode.NEGATIVE, 25, AUTH, CHECKS)
    for label in ("POST /v1/proofs", "GET /v1/proofs/{job_id}", "DELETE /v1/keys/{proof_kind}"):
        assert label in exercised, exercised


def test_without_a_token_responses_are_documented(live_url: str) -> None:
    checks = [c for c in CHECKS if c is not negative_data_rejection]
    run_operations(live_url, GenerationMode.POSITIVE, 5, {}, checks)


def _to_the_real_kind(case: Any) -> None:
    """Aim a generated submit at the configured kind with one partition's inputs, so it reaches
    the witness generator with the generated signal names and values (a kind name drawn at
    random is only ever a 404)."""
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("inputs"), list):
        body["proof_kind"] = REAL_KIND
        body["inputs"] = body["inputs"][:1] or [{}]


def test_submits_to_the_real_prover_get_documented_responses_and_no_5xx(
    real_live_url: str,
) -> None:
    """The witness generator sees whatever names and values a client sends (a lone surrogate
    in a name was a 500 before issue 19). Bounded: 60 cases, seconds."""
    statuses: list[int] = []
    exercised = run_operations(real_live_url, GenerationMode.POSITIVE, 60, AUTH, CHECKS,
                               only="POST /v1/proofs", prepare=_to_the_real_kind,
                               statuses=statuses)
    assert exercised == ["POST /v1/proofs"]
    assert statuses.count(422) >= 10, statuses  # the witness generator judged them


def test_invalid_submits_to_the_real_prover_are_4xx(real_live_url: str) -> None:
    exercised = run_operations(real_live_url, GenerationMode.NEGATIVE, 40, AUTH, CHECKS,
                               only="POST /v1/proofs")
    assert exercised == ["POST /v1/proofs"]
