"""Connection and in-flight bounds, through the real server protocol on a real port."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from cuzk.api.app import create_app
from cuzk.api.server import uvicorn_config
from cuzk.config import Config, ServerConfig
from cuzk.engine.engine import Engine
from cuzk.serve_process import uvicorn_in_thread


def metric_value(exposition: str, name: str, reason: str) -> float:
    for line in exposition.splitlines():
        if line.startswith(f'{name}{{reason="{reason}"}} '):
            return float(line.split()[-1])
    raise AssertionError(f"{name}{{reason={reason!r}}} not exported")


def serve_in_thread(engine: Engine, **server: object) -> Iterator[str]:
    config = Config(server=ServerConfig(listen="127.0.0.1:0", **server))  # type: ignore[arg-type]
    with uvicorn_in_thread(
        uvicorn_config(create_app(engine, config), config, log_level="warning")
    ) as url:
        yield url


@pytest.fixture
def capped(engine: Engine) -> Iterator[str]:
    yield from serve_in_thread(engine, max_connections=3)


@pytest.fixture
def narrow(engine: Engine) -> Iterator[str]:
    yield from serve_in_thread(engine, max_requests_in_flight=2)


def test_connections_past_the_cap_get_503_and_are_closed(capped: str) -> None:
    host, port = capped.removeprefix("http://").split(":")
    held = [http.client.HTTPConnection(host, int(port), timeout=5) for _ in range(3)]
    try:
        for conn in held:  # answered once, kept alive: the server holds each connection now
            conn.request("GET", "/healthz")
            assert conn.getresponse().read() and conn.sock is not None
        extra = socket.create_connection((host, int(port)))
        extra.settimeout(5)
        received = b""
        while chunk := extra.recv(4096):
            received += chunk
        extra.close()
        assert received.startswith(b"HTTP/1.1 503 "), received
        assert b"retry-after: 1" in received and b"server.max_connections" in received
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 5
    while True:  # the cap frees as soon as the held connections are gone
        try:
            if httpx.get(f"{capped}/healthz").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline
        time.sleep(0.05)
    metrics = httpx.get(f"{capped}/metrics").text
    assert metric_value(metrics, "cuzk_http_connections_closed_total", "too_many_connections") == 1


def hold_request(url: str) -> socket.socket:
    """A submit whose body never completes: it holds its in-flight slot while the app reads."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(
        b"POST /v1/proofs HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: 100\r\n\r\n{"
    )
    return sock


def wait_for(condition, what: str, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout:g} s"
        time.sleep(0.02)


def test_requests_past_the_in_flight_bound_get_503_probes_still_answer(narrow: str) -> None:
    with httpx.Client(base_url=narrow, timeout=30) as client:
        held = [hold_request(narrow), hold_request(narrow)]
        try:
            wait_for(lambda: client.get("/v1/status").status_code == 503, "the bound applied")
            r = client.get("/v1/status")
            assert r.headers["retry-after"] == "1"
            assert "server.max_requests_in_flight" in r.json()["error"]
            assert client.get("/healthz").status_code == 200
            ready = client.get("/readyz")  # a submit now would be refused: not ready
            assert ready.status_code == 503, ready.text
            assert "max_requests_in_flight" in ready.json()["reason"]
        finally:
            for sock in held:
                sock.close()
        wait_for(lambda: client.get("/readyz").status_code == 200, "ready once the slots free")
        assert client.get("/v1/status").status_code == 200
        metrics = client.get("/metrics").text
        assert 'cuzk_http_requests_refused_total{reason="too_many_requests"}' in metrics
        assert metric_value(metrics, "cuzk_http_requests_refused_total", "too_many_requests") >= 1
