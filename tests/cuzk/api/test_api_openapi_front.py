"""The served OpenAPI document describes the front end: the auth scheme (only when a token is
set), and on every operation the 400/401/408/431/500/501/503 it can answer."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.api.openapi_front import HTTP_METHODS
from cuzk.config import Config, ServerConfig
from cuzk.engine.engine import Engine

pytestmark = pytest.mark.filterwarnings("ignore::starlette.exceptions.StarletteDeprecationWarning")

TOKEN = "openapi-front-token-0123456789"


def served(engine: Engine, **server: object) -> dict:
    with TestClient(create_app(engine, Config(server=ServerConfig(**server)))) as c:  # type: ignore[arg-type]
        r = c.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200
        return r.json()


def operations(doc: dict):  # type: ignore[no-untyped-def]
    for path, item in doc["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                yield path, method, item[method]


def test_every_operation_documents_the_front_end_answers(engine: Engine) -> None:
    doc = served(engine, auth_token=TOKEN)
    scheme = doc["components"]["securitySchemes"]["bearerAuth"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert "ServerFault" in doc["components"]["schemas"]
    for path, method, op in operations(doc):
        responses = op["responses"]
        for code in ("400", "408", "431", "500", "501", "503"):
            assert code in responses, (path, method, code)
        fault = responses["500"]["content"]["application/json"]["schema"]
        assert fault["$ref"].rsplit("/", 1)[1] in ("ServerFault", "Error"), (path, fault)
        if path in ("/healthz", "/readyz", "/metrics"):
            assert op["security"] == [] and "401" not in responses, path
        else:
            assert op["security"] == [{"bearerAuth": []}], path
            assert "WWW-Authenticate" in responses["401"]["headers"], path
    readyz_503 = doc["paths"]["/readyz"]["get"]["responses"]["503"]
    assert "anyOf" in readyz_503["content"]["application/json"]["schema"]
    submit_503 = doc["paths"]["/v1/proofs"]["post"]["responses"]["503"]
    assert "Retry-After" in submit_503["headers"]
    submit_400 = doc["paths"]["/v1/proofs"]["post"]["responses"]["400"]["description"]
    assert "Malformed HTTP" in submit_400 and submit_400 != "Malformed HTTP", submit_400


def test_metrics_security_follows_its_switch(engine: Engine) -> None:
    doc = served(engine, auth_token=TOKEN, metrics_require_auth=True)
    metrics = doc["paths"]["/metrics"]["get"]
    assert metrics["security"] == [{"bearerAuth": []}] and "401" in metrics["responses"]


def test_no_token_no_security_scheme(engine: Engine) -> None:
    doc = served(engine)
    assert "securitySchemes" not in doc["components"] and "security" not in doc
    for path, method, op in operations(doc):
        assert "401" not in op["responses"], (path, method)
