"""What a client chooses never forges a log line, and no answer echoes the client's Host header
(issue 19: a ``%0a`` in a refused path wrote a line of its own; a trailing-slash 307 pointed at
whatever Host the client sent)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.config import Config, ServerConfig
from cuzk.engine.engine import Engine
from cuzk.logsafe import loggable

pytestmark = pytest.mark.filterwarnings("ignore::starlette.exceptions.StarletteDeprecationWarning")

TOKEN = "log-and-host-token-0123456789"
FORGED = "INFO cuzk.api: job abc succeeded"


@pytest.fixture
def client(engine: Engine) -> Iterator[TestClient]:
    app = create_app(engine, Config(server=ServerConfig(auth_token=TOKEN)))
    with TestClient(app, follow_redirects=False) as c:
        yield c


def test_a_refused_path_with_an_encoded_newline_is_logged_on_one_line(client, caplog):
    caplog.set_level(logging.WARNING, logger="cuzk.api")
    path = "/v1/proofs/x%0d%0a" + FORGED.replace(" ", "%20")
    r = client.get(path, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    (record,) = [r for r in caplog.records if "invalid bearer token" in r.getMessage()]
    line = record.getMessage()
    assert "\n" not in line and "\r" not in line, line
    assert "x\\r\\n" + FORGED in line  # what was asked is still there to read, escaped


def test_loggable_escapes_what_a_terminal_or_parser_acts_on():
    assert loggable("a\nb\rc\x1b[31md\\e\u202ef\ud800") == "a\\nb\\rc\\x1b[31md\\\\e\\u202ef\\ud800"
    assert loggable("x" * 500, limit=10) == "x" * 10 + "..."
    assert loggable("/v1/status") == "/v1/status"


@pytest.mark.parametrize("path", ["/v1/status/", "/v1/circuits/", "/healthz/"])
def test_a_trailing_slash_is_not_redirected_to_the_clients_host(client, path):
    r = client.get(path, headers={"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"})
    assert r.status_code == 404, (r.status_code, r.headers)
    assert "location" not in r.headers
    assert "trailing slash" in r.json()["error"]
