"""Schemathesis against the live server's own /openapi.json: every generated request (valid and
invalid, deterministic seed, bounded examples) gets no 5xx and a response the schema documents
(status code, content type, headers, body). The engine is the scripted one so the run is quick;
the routes, middleware and server protocol are the real ones."""

from __future__ import annotations

from collections.abc import Iterator

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
from cuzk.serve_process import uvicorn_in_thread

TOKEN = "schema-fuzz-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
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


def run_operations(url: str, mode: GenerationMode, examples: int, headers: dict[str, str],
                   checks: list) -> list[str]:  # type: ignore[type-arg]  # fmt: skip
    """Every operation of the served schema, ``examples`` generated cases each (derandomized):
    returns the operations that were exercised."""
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", headers=AUTH)
    exercised = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=examples,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case) -> None:  # type: ignore[no-untyped-def]
            case.call_and_validate(headers=headers, checks=checks, timeout=30)

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
