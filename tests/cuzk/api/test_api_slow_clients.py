"""Slow and abusive clients against the real `cuzk serve` process (CPU backend, real prover).

Each connection that sends nothing, trickles its headers or trickles its body must be closed
within its configured bound plus a small margin; while 200 such connections are held open,
/healthz still answers within 100 ms and a real proof job still succeeds.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cuzk.serve_process import ServeProcess, serve_env
from tests.conftest import KEYS_DIR

HEADER_S = 1.0
BODY_S = 2.0
KEEPALIVE_S = 1.0
MARGIN_S = 0.75  # scheduling slack on a loaded 2-core CI machine; the bounds are 1-2 s
TRICKLE_S = 0.2  # a slow client sends one byte this often: faster than any bound


def start_serve(extra_env: dict[str, str]) -> ServeProcess:
    # Each server its own journal: two never share one (the second would refuse to start).
    journal = Path(tempfile.mkdtemp(prefix="cuzk-test-")) / "journal.db"
    served = ServeProcess(serve_env(journal, KEYS_DIR, **extra_env))
    served.start(timeout=60)
    return served


@pytest.fixture(scope="module")
def tight() -> Iterator[ServeProcess]:
    """A server with short bounds, so each test measures them in about a second."""
    served = start_serve(
        {
            "CUZK_SERVER_HEADER_TIMEOUT_S": str(HEADER_S),
            "CUZK_SERVER_BODY_TIMEOUT_S": str(BODY_S),
            "CUZK_SERVER_KEEPALIVE_TIMEOUT_S": str(KEEPALIVE_S),
        }
    )
    yield served
    served.stop()


def hold_until_closed(
    served: ServeProcess, pieces: list[bytes], limit_s: float = 15.0
) -> tuple[float, bytes]:
    """Connect, send ``pieces[0]`` then one byte of the rest every TRICKLE_S, and return the
    seconds until the server closed the connection and everything it sent."""
    sock = socket.create_connection((served.host, served.port))
    started = time.monotonic()
    received = b""
    rest = b"".join(pieces[1:])
    try:
        if pieces:
            sock.sendall(pieces[0])
        sock.settimeout(TRICKLE_S)
        while time.monotonic() - started < limit_s:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                if rest:
                    try:
                        sock.sendall(rest[:1])
                    except OSError:
                        break
                    rest = rest[1:]
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
        return time.monotonic() - started, received
    finally:
        sock.close()


def test_idle_after_connect_is_closed_within_the_header_bound(tight: ServeProcess) -> None:
    took, received = hold_until_closed(tight, [])
    assert HEADER_S - 0.05 <= took <= HEADER_S + MARGIN_S, took
    assert received == b""  # nothing was asked, nothing is answered


def test_slow_headers_are_closed_with_408(tight: ServeProcess) -> None:
    # The request line at once, then headers one byte at a time for longer than the bound.
    headers = b"GET /healthz HTTP/1.1\r\n" + b"X-Slow: " + b"a" * 200 + b"\r\n\r\n"
    split = len(b"GET /healthz HTTP/1.1\r\n")
    took, received = hold_until_closed(tight, [headers[:split], headers[split:]])
    assert HEADER_S - 0.05 <= took <= HEADER_S + MARGIN_S, took
    assert received.startswith(b"HTTP/1.1 408 "), received
    assert b"server.header_timeout_s" in received


def test_slow_body_is_closed_with_408(tight: ServeProcess) -> None:
    body = b'{"proof_kind": "winning-post", "inputs": [{}]}' + b" " * 500
    head = (
        b"POST /v1/proofs HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    took, received = hold_until_closed(tight, [head, body])
    assert BODY_S - 0.05 <= took <= BODY_S + MARGIN_S, took
    assert received.startswith(b"HTTP/1.1 408 "), received
    assert b"server.body_timeout_s" in received


def cut_counts(served: ServeProcess) -> dict[str, float]:
    counts = {}
    for line in httpx.get(f"{served.url}/metrics").text.splitlines():
        if line.startswith("cuzk_http_connections_closed_total{"):
            counts[line.split('"')[1]] = float(line.split()[-1])
    return counts


def test_cut_connections_are_counted_by_reason(tight: ServeProcess) -> None:
    before = cut_counts(tight)
    head = b"POST /v1/proofs HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n"
    slow_body = threading.Thread(target=hold_until_closed, args=(tight, [head, b"{" * 100]))
    slow_body.start()
    hold_until_closed(tight, [])
    slow_body.join(15)
    after = cut_counts(tight)
    assert after["header_timeout"] == before["header_timeout"] + 1, (before, after)
    assert after["body_timeout"] == before["body_timeout"] + 1, (before, after)
    assert after["too_many_connections"] == before["too_many_connections"]


def test_idle_kept_alive_connection_is_closed_within_the_keepalive_bound(
    tight: ServeProcess,
) -> None:
    took, received = hold_until_closed(tight, [b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"])
    assert received.startswith(b"HTTP/1.1 200 "), received
    assert KEEPALIVE_S - 0.05 <= took <= KEEPALIVE_S + MARGIN_S, took


def test_next_request_on_a_kept_alive_connection_gets_the_header_bound(tight: ServeProcess) -> None:
    """A first request answered at once, then a second one trickled: the header bound applies
    from the second request's first byte (the keep-alive wait is cancelled by that byte)."""
    first = b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
    second = b"GET /healthz HTTP/1.1\r\n" + b"X-Slow: " + b"b" * 200 + b"\r\n\r\n"
    took, received = hold_until_closed(tight, [first + second[:1], second[1:]])
    assert received.startswith(b"HTTP/1.1 200 "), received
    assert b"HTTP/1.1 408 " in received, received
    assert HEADER_S - 0.05 <= took <= HEADER_S + MARGIN_S, took


class Attackers:
    """N connections held open: a third silent, a third trickling headers, a third trickling
    a body, each sending one byte every TRICKLE_S from one thread."""

    def __init__(self, served: ServeProcess, n: int) -> None:
        self.selector = selectors.DefaultSelector()
        self.socks: list[tuple[socket.socket, bytes]] = []
        body_head = (
            b"POST /v1/proofs HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{"
        )
        for i in range(n):
            s = socket.create_connection((served.host, served.port))
            s.setblocking(False)
            kind = i % 3
            if kind == 1:
                s.send(b"GET /v1/status HTTP/1.1\r\n")
                drip = b"X"
            elif kind == 2:
                s.send(body_head)
                drip = b" "
            else:
                drip = b""
            self.socks.append((s, drip))
        self.closed = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._drip, daemon=True)
        self.thread.start()

    def _drip(self) -> None:
        while not self.stopping.wait(TRICKLE_S):
            for s, drip in self.socks:
                if drip:
                    with contextlib.suppress(OSError):
                        s.send(drip)

    def open_count(self) -> int:
        """Connections the server has not closed (a closed one reads EOF or errors)."""
        n = 0
        for s, _ in self.socks:
            try:
                if s.recv(1, socket.MSG_PEEK) == b"":
                    continue
            except BlockingIOError:
                pass
            except OSError:
                continue
            n += 1
        return n

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        for s, _ in self.socks:
            s.close()


@pytest.mark.slow
def test_200_slow_connections_starve_neither_health_nor_a_real_job() -> None:
    served = start_serve({"CUZK_SERVER_HEADER_TIMEOUT_S": "60", "CUZK_SERVER_BODY_TIMEOUT_S": "60"})
    attackers = None
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            # Load the key first: this measures the front end, not key generation.
            assert client.post("/v1/keys/winning-post/preload").status_code == 200
            attackers = Attackers(served, 200)
            time.sleep(1.0)  # let the trickles start
            assert attackers.open_count() == 200
            latencies = []
            for _ in range(20):
                t0 = time.perf_counter()
                r = client.get("/healthz")
                latencies.append(time.perf_counter() - t0)
                assert r.status_code == 200
            print(f"healthz with 200 slow connections open: max {max(latencies) * 1000:.1f} ms")
            assert max(latencies) < 0.100, latencies
            sample = Path(__file__).resolve().parents[3] / "cuzk/circuits/data/winning-post"
            inputs = (sample / "input.json").read_text()
            r = client.post(
                "/v1/proofs",
                content=f'{{"proof_kind": "winning-post", "inputs": [{inputs}]}}',
                headers={"content-type": "application/json"},
            )
            assert r.status_code == 202, r.text
            job = r.json()
            deadline = time.monotonic() + 120
            while job["state"] not in ("succeeded", "failed", "cancelled"):
                assert time.monotonic() < deadline, job
                job = client.get(f"/v1/proofs/{job['id']}", params={"wait": 5}).json()
            assert job["state"] == "succeeded", job
            assert attackers.open_count() == 200  # held the whole time: the bound is 60 s
    finally:
        if attackers is not None:
            attackers.close()
        served.stop()
