"""Bearer-token authentication: every route but health, readiness (and metrics unless asked)
needs the token; a missing or wrong one is a 401 with a challenge and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.api.auth import BearerAuth, resolve_token
from cuzk.config import Config, ConfigError, ServerConfig, load_config
from cuzk.engine.engine import Engine
from cuzk.simulated_prover import ScriptedProver

pytestmark = pytest.mark.filterwarnings("ignore::starlette.exceptions.StarletteDeprecationWarning")

TOKEN = "s3cret-token-for-tests-0123456789"
OK_SUBMIT = {"proof_kind": "winning-post", "inputs": [{"tag": "1"}]}

# Every route the app serves, with a request that would change state or reveal it.
PROTECTED: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/v1/proofs", {"json": OK_SUBMIT}),
    ("GET", "/v1/proofs/{job}", {}),
    ("DELETE", "/v1/proofs/{job}", {}),
    ("GET", "/v1/status", {}),
    ("GET", "/v1/circuits", {}),
    ("POST", "/v1/keys/winning-post/preload", {}),
    ("DELETE", "/v1/keys/winning-post", {}),
    ("POST", "/v1/workers/pause", {}),
    ("POST", "/v1/workers/resume", {}),
    ("GET", "/openapi.json", {}),
    ("GET", "/no/such/route", {}),  # unauthenticated callers cannot probe for routes either
]


def make_client(engine: Engine, **server: Any) -> TestClient:
    return TestClient(create_app(engine, Config(server=ServerConfig(**server))))


@pytest.fixture
def authed(engine: Engine) -> Iterator[TestClient]:
    with make_client(engine, auth_token=TOKEN) as c:
        yield c


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def state(client: TestClient) -> dict[str, Any]:
    status = client.get("/v1/status", headers=bearer(TOKEN)).json()
    for volatile in ("time", "uptime_s"):
        status.pop(volatile, None)
    for key in status["keys"]:
        key.pop("idle_s", None)
    return status


@pytest.mark.parametrize(
    "headers",
    [
        {},
        bearer("wrong-token-of-some-length"),
        bearer(TOKEN[:-1]),
        bearer(TOKEN + "x"),
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
    ],
    ids=["missing", "wrong", "prefix", "longer", "basic-scheme", "no-scheme"],
)
def test_without_the_right_token_every_route_is_401_and_nothing_changes(
    authed: TestClient, prover: ScriptedProver, headers: dict[str, str]
) -> None:
    job = authed.post("/v1/proofs", json=OK_SUBMIT, headers=bearer(TOKEN)).json()
    authed.get(f"/v1/proofs/{job['id']}", params={"wait": 10}, headers=bearer(TOKEN))
    before, calls = state(authed), dict(prover.calls)
    for method, path, kwargs in PROTECTED:
        r = authed.request(method, path.replace("{job}", job["id"]), headers=headers, **kwargs)
        assert r.status_code == 401, (method, path, r.text)
        assert r.headers["content-type"] == "application/json"
        assert r.headers["www-authenticate"].startswith('Bearer realm="cuzk"')
        assert "error" in r.json()
    assert state(authed) == before
    assert prover.calls == calls
    refused = [
        line for line in authed.get("/metrics").text.splitlines()
        if line.startswith('cuzk_http_requests_refused_total{reason="unauthorized"}')
    ]  # fmt: skip
    assert refused and float(refused[0].split()[-1]) == len(PROTECTED)


def test_wrong_token_challenge_says_invalid_token(authed: TestClient) -> None:
    missing = authed.get("/v1/status")
    wrong = authed.get("/v1/status", headers=bearer("nope-nope-nope-nope"))
    assert "invalid_token" not in missing.headers["www-authenticate"]
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert "Authorization: Bearer" in missing.json()["error"]


def test_with_the_token_every_route_works(authed: TestClient) -> None:
    h = bearer(TOKEN)
    r = authed.post("/v1/proofs", json=OK_SUBMIT, headers=h)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    assert (
        authed.get(f"/v1/proofs/{job_id}", params={"wait": 10}, headers=h).json()["state"]
        == "succeeded"
    )
    assert authed.get("/v1/status", headers=h).status_code == 200
    assert authed.get("/v1/circuits", headers=h).status_code == 200
    assert authed.get("/openapi.json", headers=h).status_code == 200
    assert authed.post("/v1/workers/pause", headers=h).json() == {"workers_paused": True}
    assert authed.post("/v1/workers/resume", headers=h).json() == {"workers_paused": False}
    assert authed.get("/no/such/route", headers=h).status_code == 404


def test_health_readiness_and_metrics_stay_open(authed: TestClient) -> None:
    assert authed.get("/healthz").status_code == 200
    assert authed.get("/readyz").status_code == 200
    assert authed.get("/metrics").status_code == 200


def test_metrics_can_require_the_token(engine: Engine) -> None:
    with make_client(engine, auth_token=TOKEN, metrics_require_auth=True) as c:
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers=bearer(TOKEN)).status_code == 200
        assert c.get("/healthz").status_code == 200


def test_no_token_configured_means_no_authentication(engine: Engine) -> None:
    with make_client(engine) as c:
        assert c.get("/v1/status").status_code == 200
        assert c.get("/v1/status", headers=bearer("anything-at-all-here")).status_code == 200


def test_token_from_a_file(engine: Engine, tmp_path: Path) -> None:
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    with make_client(engine, auth_token_file=f) as c:
        assert c.get("/v1/status").status_code == 401
        assert c.get("/v1/status", headers=bearer(TOKEN)).status_code == 200


def test_token_from_the_environment(tmp_path: Path) -> None:
    config = load_config(None, env={"CUZK_SERVER_AUTH_TOKEN": TOKEN})
    assert resolve_token(config.server) == TOKEN
    f = tmp_path / "t"
    f.write_text(TOKEN)
    config = load_config(None, env={"CUZK_SERVER_AUTH_TOKEN_FILE": str(f)})
    assert resolve_token(config.server) == TOKEN
    assert resolve_token(load_config(None, env={"CUZK_SERVER_AUTH_TOKEN": ""}).server) is None


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ({"auth_token": TOKEN, "auth_token_file": Path("/x")}, "both set"),
        ({"auth_token": "short"}, "at least 16"),
        ({"auth_token": "has a space in it, long enough"}, "without spaces"),
        ({"auth_token_file": Path("/no/such/token/file")}, "server.auth_token_file"),
    ],
)
def test_bad_token_settings_name_the_key(server: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as e:
        resolve_token(ServerConfig(**server))
    assert "server.auth_token" in str(e.value)


def test_empty_token_file_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "empty"
    f.write_text("\n")
    with pytest.raises(ConfigError, match="the file is empty"):
        resolve_token(ServerConfig(auth_token_file=f))


def test_comparison_is_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The token check goes through hmac.compare_digest (never ==)."""
    import cuzk.api.auth as auth

    seen: list[tuple[bytes, bytes]] = []
    real = auth.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    guard = BearerAuth(app=None, token=TOKEN)
    assert guard.authorized([(b"authorization", f"Bearer {TOKEN}".encode())]) is True
    assert guard.authorized([(b"authorization", b"Bearer nope")]) is False
    assert seen == [(TOKEN.encode(), TOKEN.encode()), (b"nope", TOKEN.encode())]
