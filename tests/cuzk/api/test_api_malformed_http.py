"""Malformed HTTP framing against the real `cuzk serve` process: what h11 refuses is answered
with JSON naming the fault, the status h11 hints, `Connection: close`, and the connection closed;
each is counted, and the server keeps serving."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cuzk.serve_process import ServeProcess, serve_env
from tests.conftest import KEYS_DIR

HOST = b"Host: t\r\n"
CHUNKED_POST = (
    b"POST /v1/proofs HTTP/1.1\r\n" + HOST
    + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
)  # fmt: skip

CASES = {
    "bad request line": (b"GARBAGE\r\n\r\n", 400, "illegal request line: b'GARBAGE'"),
    "bad header line": (
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"Bad Header\r\n\r\n",
        400,
        "illegal header line: b'Bad Header'",
    ),
    "no Host header": (b"GET /healthz HTTP/1.1\r\n\r\n", 400, "Missing mandatory Host: header"),
    "bad Content-Length": (
        b"POST /v1/proofs HTTP/1.1\r\n" + HOST + b"Content-Length: ten\r\n\r\n",
        400,
        "bad Content-Length",
    ),
    # The headers go on past h11's 16 KiB limit without ending.
    "header block too large": (
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Big: " + b"a" * 40_000,
        431,
        "request header fields too large: over 16384 bytes",
    ),
    # The route is already reading the body when the chunk size line turns out to be garbage.
    "bad chunked encoding": (
        CHUNKED_POST + b"2\r\n{}\r\nzz\r\n",
        400,
        "illegal chunk header: b'zz\\r\\n'",
    ),
    "unsupported transfer coding": (
        b"POST /v1/proofs HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: gzip\r\n\r\n",
        501,
        "Only Transfer-Encoding: chunked is supported",
    ),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    journal = Path(tmp_path_factory.mktemp("malformed")) / "journal.sqlite3"
    server = ServeProcess(serve_env(journal, KEYS_DIR))
    server.start(timeout=60)
    yield server
    server.stop()
    assert "Traceback" not in server.output, server.output


def exchange(served: ServeProcess, request: bytes, limit_s: float = 10.0) -> bytes:
    """Send ``request`` and return all the server sends until it closes (bounded)."""
    with socket.create_connection((served.host, served.port)) as sock:
        sock.settimeout(limit_s)
        sock.sendall(request)
        received = b""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                return received
            received += chunk
        raise AssertionError(f"the connection stayed open; received {received!r}")


def malformed_count(served: ServeProcess) -> float:
    for line in httpx.get(f"{served.url}/metrics").text.splitlines():
        if line.startswith('cuzk_http_connections_closed_total{reason="malformed_request"} '):
            return float(line.split()[-1])
    raise AssertionError("no malformed_request count exported")


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_http_gets_a_json_error_and_the_connection_closed(
    served: ServeProcess, case: str
) -> None:
    request, status, names = CASES[case]
    before = malformed_count(served)
    received = exchange(served, request)
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("ascii").split("\r\n")
    assert lines[0].startswith(f"HTTP/1.1 {status} "), received
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    assert headers["content-type"] == "application/json", headers
    assert headers["connection"] == "close", headers
    assert int(headers["content-length"]) == len(body), received
    error = json.loads(body)["error"]
    assert names in error, error
    assert malformed_count(served) == before + 1
    assert httpx.get(f"{served.url}/healthz").status_code == 200  # and the server serves on


def test_a_well_formed_request_after_them_is_untouched(served: ServeProcess) -> None:
    """A valid chunked request (the same framing, correctly done) still works."""
    before = malformed_count(served)
    received = exchange(
        served, CHUNKED_POST.replace(b"/v1/proofs", b"/v1/nowhere") + b"2\r\n{}\r\n0\r\n\r\n"
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n",
    )  # fmt: skip
    assert received.startswith(b"HTTP/1.1 404 "), received
    assert b"HTTP/1.1 200 " in received, received
    assert malformed_count(served) == before
