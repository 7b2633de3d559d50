"""Connection and in-flight bounds, through the real server protocol on a real port."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from cuzk.api.app import create_app
from cuzk.api.server import uvicorn_config
from cuzk.config import Config, ServerConfig
from cuzk.engine.engine import Engine
from cuzk.serve_process import uvicorn_in_thread
from cuzk.testing import ScriptedProver


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


def test_requests_past_the_in_flight_bound_get_503_health_still_answers(
    narrow: str, prover: ScriptedProver
) -> None:
    gate = prover.hold("gpu", "1")
    with httpx.Client(base_url=narrow, timeout=30) as client:
        job = client.post(
            "/v1/proofs", json={"proof_kind": "winning-post", "inputs": [{"tag": "1"}]}
        ).json()
        assert gate.wait_entered()
        with ThreadPoolExecutor(2) as pool:

            def long_poll():  # type: ignore[no-untyped-def]
                return pool.submit(client.get, f"/v1/proofs/{job['id']}", params={"wait": 20})

            polls = [long_poll(), long_poll()]
            deadline = time.monotonic() + 10
            while True:  # both long-polls are inside the app once a third request is refused
                r = client.get("/v1/status")
                if r.status_code == 503:
                    break
                # A long-poll that arrived while a probe was in flight was itself refused.
                polls = [
                    long_poll() if p.done() and p.result().status_code == 503 else p for p in polls
                ]
                assert time.monotonic() < deadline, "the bound never applied"
                time.sleep(0.05)
            assert r.headers["retry-after"] == "1"
            assert "server.max_requests_in_flight" in r.json()["error"]
            assert client.get("/healthz").status_code == 200
            assert client.get("/readyz").status_code == 200
            gate.release()
            assert all(p.result().json()["state"] == "succeeded" for p in polls)
        assert client.get("/v1/status").status_code == 200
        metrics = client.get("/metrics").text
        assert 'cuzk_http_requests_refused_total{reason="too_many_requests"}' in metrics
        assert metric_value(metrics, "cuzk_http_requests_refused_total", "too_many_requests") >= 1
